#include "ckptplan/ir/device.h"

#include <algorithm>

#include "ckptplan/base/errors.h"

namespace ckptplan {
namespace {

// Vendor datasheet figures, dense (no sparsity): SXM parts for NVIDIA. Host
// links are sustained rates per direction: PCIe 3.0 x16 about 12 GB/s, 4.0 x16
// about 25 GB/s, 5.0 x16 about 50 GB/s; GH200's NVLink-C2C up to 450 GB/s.
constexpr DeviceSpec kDevices[] = {
    {"h100", 989e12, 67e12, 134e12, 3.35e12, 50e9},
    {"h200", 989e12, 67e12, 134e12, 4.8e12, 50e9},
    {"gh200", 989e12, 67e12, 134e12, 4.0e12, 450e9},
    {"a100", 312e12, 19.5e12, 78e12, 2.039e12, 25e9},
    {"v100", 125e12, 15.7e12, 31.4e12, 0.9e12, 12e9},
    {"l4", 121e12, 30.3e12, 30.3e12, 0.3e12, 25e9},
    {"mi300x", 1307e12, 163.4e12, 163.4e12, 5.3e12, 50e9},
    {"cpu", 2e12, 1e12, 1e12, 0.2e12, 0},
};

}  // namespace

const DeviceSpec* LookupDevice(std::string_view name) {
  for (const DeviceSpec& device : kDevices) {
    if (name == device.name) return &device;
  }
  return nullptr;
}

std::vector<const DeviceSpec*> AllDevices() {
  std::vector<const DeviceSpec*> all;
  for (const DeviceSpec& device : kDevices) all.push_back(&device);
  return all;
}

const DeviceSpec& FindDevice(const std::string& name) {
  if (const DeviceSpec* device = LookupDevice(name)) return *device;
  std::string names;
  for (const DeviceSpec& device : kDevices) names += (names.empty() ? "" : ", ") + std::string(device.name);
  throw InputError("unknown device '" + name + "' (expected " + names + ")", kExitUsage);
}

double RooflineMicros(const DeviceSpec& device, double flops, double bytes, bool matrix,
                      bool sixteen_bit) {
  double rate = !matrix ? device.vector_flops
                        : sixteen_bit ? device.matrix_16bit_flops : device.matrix_fp32_flops;
  return std::max(flops / rate, bytes / device.bandwidth) * 1e6;
}

}  // namespace ckptplan
