// Accelerator presets for the roofline cost model of ONNX graphs.
#ifndef CKPTPLAN_DEVICE_H_
#define CKPTPLAN_DEVICE_H_

#include <string>
#include <string_view>
#include <vector>

namespace ckptplan {

/// Dense peak rates, FLOP/s, and memory bandwidth, bytes/s.
struct DeviceSpec {
  const char* name;
  double matrix_16bit_flops;  ///< tensor cores, bf16/fp16 inputs
  double matrix_fp32_flops;   ///< fp32 matmul/conv (no TF32)
  double vector_flops;        ///< elementwise fp32 / 16-bit ALU rate
  double bandwidth;           ///< HBM bytes/s
  /// Sustained device-host copy rate per direction, bytes/s; 0 when host
  /// memory is the device's own (cpu), so there is nothing to offload to.
  double host_link = 0;
};

/// The preset named `name` (h100, h200, gh200, a100, v100, l4, mi300x, cpu); throws
/// InputError (kExitUsage) listing the names otherwise.
const DeviceSpec& FindDevice(const std::string& name);
/// The preset named `name`, or nullptr.
const DeviceSpec* LookupDevice(std::string_view name);
/// Every preset, in table order.
std::vector<const DeviceSpec*> AllDevices();

/// Roofline time of one op in microseconds: the slower of compute
/// (flops / rate) and memory traffic (bytes / bandwidth).
double RooflineMicros(const DeviceSpec& device, double flops, double bytes, bool matrix,
                      bool sixteen_bit);

}  // namespace ckptplan

#endif  // CKPTPLAN_DEVICE_H_
