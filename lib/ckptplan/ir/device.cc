#include "ckptplan/ir/device.h"

#include <algorithm>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

// Vendor datasheet figures, dense (no sparsity): SXM parts for NVIDIA.
constexpr DeviceSpec kDevices[] = {
    {"h100", 989e12, 67e12, 134e12, 3.35e12},
    {"h200", 989e12, 67e12, 134e12, 4.8e12},
    {"a100", 312e12, 19.5e12, 78e12, 2.039e12},
    {"v100", 125e12, 15.7e12, 31.4e12, 0.9e12},
    {"l4", 121e12, 30.3e12, 30.3e12, 0.3e12},
    {"mi300x", 1307e12, 163.4e12, 163.4e12, 5.3e12},
    {"cpu", 2e12, 1e12, 1e12, 0.2e12},
};

}  // namespace

const DeviceSpec& FindDevice(const std::string& name) {
  std::string names;
  for (const DeviceSpec& device : kDevices) {
    if (name == device.name) return device;
    names += (names.empty() ? "" : ", ") + std::string(device.name);
  }
  throw InputError("--device: unknown device '" + name + "' (expected " + names + ")", kExitUsage);
}

double RooflineMicros(const DeviceSpec& device, double flops, double bytes, bool matrix,
                      bool sixteen_bit) {
  double rate = !matrix ? device.vector_flops
                        : sixteen_bit ? device.matrix_16bit_flops : device.matrix_fp32_flops;
  return std::max(flops / rate, bytes / device.bandwidth) * 1e6;
}

}  // namespace ckptplan
