// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright TIRx authors
//
// A launcher bound to one call shape of a compiled TIRx kernel: the checks its generated host
// function makes (dtype, shape, compact strides, alignment, device), the TMA descriptors it
// encodes, then cudaLaunchKernel(ExC) on the tvm-ffi stream, without TVM's CUDA-module
// launcher (why: flashinfer docs/overhead.md).
// The Python side (direct_launch.py) reads the spec from the executable's host code.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/cuda/cubin_launcher.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/string.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

using tvm::ffi::AnyView;
using tvm::ffi::Array;
using tvm::ffi::Function;
using tvm::ffi::PackedArgs;
namespace cuda_api = tvm::ffi::cuda_api;

// how a kernel parameter is made from the call's arguments (direct_launch.py: PARAM_KINDS)
enum ParamKind : int64_t {
  kPointer = 0,
  kF32 = 1,
  kI32 = 2,
  kI64 = 3,
  kConstI32 = 4,
  kConstI64 = 5,
  kConstF32 = 6,  // the value's bits
  kTensorMap = 7,  // the launch's maps[value], encoded per call
};

// a tiled TMA descriptor of a tensor argument (launch_spec.TensorMap.words)
struct MapSpec {
  int arg;
  CUtensorMapDataType dtype;
  cuuint32_t rank;
  CUtensorMapInterleave interleave;
  CUtensorMapSwizzle swizzle;
  CUtensorMapL2promotion l2_promotion;
  CUtensorMapFloatOOBfill oob_fill;
  cuuint64_t dims[5], strides[4];
  cuuint32_t box[5], element_strides[5];
};

struct TensorCheck {
  int arg;
  DLDevice device;
  DLDataType dtype;
  int64_t align;
  std::vector<int64_t> shape;
};

struct Launch {
  cuda_api::KernelHandle kernel;
  int64_t dims[6];  // grid xyz, block xyz: a constant, or -(i + 1) for int argument i
  uint32_t dyn_smem;
  unsigned cluster[3];
  std::vector<std::pair<int64_t, int64_t>> params;  // (ParamKind, argument index or value)
  std::vector<MapSpec> maps;
};

using EncodeTiled = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                 const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                 const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                 CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// the driver's cuTensorMapEncodeTiled, found once through the runtime
EncodeTiled Encoder() {
  static EncodeTiled encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found;
    TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(cudaGetDriverEntryPointByVersion(
        "cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    TVM_FFI_ICHECK(fn != nullptr && found == cudaDriverEntryPointSuccess);
    return reinterpret_cast<EncodeTiled>(fn);
  }();
  return encode;
}

struct Bound {
  std::string name;
  int num_args;
  std::vector<TensorCheck> checks;
  std::vector<std::pair<int, int64_t>> pinned;  // int arguments the launch was folded for
  std::vector<Launch> launches;
  bool dry;
};

const DLTensor* TensorArg(const Bound& b, const PackedArgs& args, int i) {
  auto t = args[i].try_cast<DLTensor*>();
  if (!t.has_value()) {
    TVM_FFI_THROW(TypeError) << b.name << ": argument #" << i << " must be a tensor, got "
                             << args[i].GetTypeKey();
  }
  return *t;
}

void Check(const Bound& b, const PackedArgs& args) {
  if (args.size() != b.num_args) {
    TVM_FFI_THROW(TypeError) << b.name << ": expected " << b.num_args << " arguments, got "
                             << args.size();
  }
  for (const TensorCheck& c : b.checks) {
    const DLTensor* t = TensorArg(b, args, c.arg);
    bool ok = t->ndim == static_cast<int>(c.shape.size()) && t->dtype.code == c.dtype.code &&
              t->dtype.bits == c.dtype.bits && t->dtype.lanes == c.dtype.lanes &&
              t->device.device_type == c.device.device_type &&
              t->device.device_id == c.device.device_id;
    int64_t expected_stride = 1;
    for (int d = t->ndim - 1; ok && d >= 0; --d) {
      ok = t->shape[d] == c.shape[d] &&
           (t->strides == nullptr || t->shape[d] == 1 || t->strides[d] == expected_stride);
      expected_stride *= t->shape[d];
    }
    uintptr_t address = reinterpret_cast<uintptr_t>(t->data) + t->byte_offset;
    if (!ok || address % c.align != 0) {
      TVM_FFI_THROW(ValueError) << b.name << ": argument #" << c.arg
                                << " is not the compact, " << c.align
                                << "-byte aligned tensor of the shape, dtype and device this "
                                   "launcher was bound to";
    }
  }
  for (const auto& [arg, value] : b.pinned) {
    auto given = args[arg].try_cast<int64_t>();
    if (!given.has_value() || *given != value) {
      TVM_FFI_THROW(ValueError) << b.name << ": argument #" << arg
                                << " must be the size this launcher was bound to, " << value;
    }
  }
}

// the value a kernel parameter points to (params[k] = &values[k])
union Value {
  void* pointer;
  float f32;
  int32_t i32;
  int64_t i64;
};

Value ParamValue(const Bound& b, const PackedArgs& args, int64_t kind, int64_t v) {
  Value out;
  out.i64 = 0;
  switch (kind) {
    case kPointer: {
      const DLTensor* t = TensorArg(b, args, static_cast<int>(v));
      out.pointer = static_cast<char*>(t->data) + t->byte_offset;
      break;
    }
    case kF32:
      out.f32 = static_cast<float>(args[v].cast<double>());
      break;
    case kI32:
      out.i32 = static_cast<int32_t>(args[v].cast<int64_t>());
      break;
    case kI64:
      out.i64 = args[v].cast<int64_t>();
      break;
    case kConstI32:
      out.i32 = static_cast<int32_t>(v);
      break;
    case kConstI64:
      out.i64 = v;
      break;
    case kConstF32: {
      uint32_t bits = static_cast<uint32_t>(v);
      std::memcpy(&out.f32, &bits, sizeof(bits));
      break;
    }
    default:
      TVM_FFI_THROW(InternalError) << b.name << ": unknown parameter kind " << kind;
  }
  return out;
}

void Call(const Bound& b, PackedArgs args, tvm::ffi::Any* rv) {
  Check(b, args);
  Array<int64_t> dry;  // per launch its parameters as int64 words, then its dims (tests)
  for (const Launch& l : b.launches) {
    Value values[64];
    void* params[64];
    alignas(64) CUtensorMap maps[8];
    size_t n = l.params.size();
    for (size_t k = 0; k < n; ++k) {
      int64_t kind = l.params[k].first, v = l.params[k].second;
      if (kind == kTensorMap) {  // by value: the kernel takes the 128-byte descriptor
        const MapSpec& m = l.maps[v];
        const DLTensor* t = TensorArg(b, args, m.arg);
        void* address = static_cast<char*>(t->data) + t->byte_offset;
        if (b.dry) {  // no driver to encode with here: the address it would take
          dry.push_back(reinterpret_cast<int64_t>(address));
          continue;
        }
        CUresult encoded =
            Encoder()(&maps[v], m.dtype, m.rank, address, m.dims, m.strides, m.box,
                      m.element_strides, m.interleave, m.swizzle, m.l2_promotion, m.oob_fill);
        if (encoded != CUDA_SUCCESS) {
          TVM_FFI_THROW(RuntimeError) << b.name << ": cuTensorMapEncodeTiled of argument #"
                                      << m.arg << " failed (CUresult " << encoded << ")";
        }
        params[k] = &maps[v];
        continue;
      }
      values[k] = ParamValue(b, args, kind, v);
      params[k] = &values[k];
      if (b.dry) dry.push_back(values[k].i64);
    }
    uint32_t dims[6];
    for (int d = 0; d < 6; ++d) {
      int64_t v = l.dims[d] >= 0 ? l.dims[d] : args[-l.dims[d] - 1].cast<int64_t>();
      if (v <= 0 || v > INT32_MAX) {
        TVM_FFI_THROW(ValueError) << b.name << ": launch dimension " << d << " is " << v;
      }
      dims[d] = static_cast<uint32_t>(v);
      if (b.dry) dry.push_back(v);
    }
    if (b.dry) continue;
    int device = b.checks.empty() ? 0 : b.checks[0].device.device_id;
    int current = -1;
    // the host function sets the device too (TVMBackendSetDevice); here only when it differs
    if (cudaGetDevice(&current) != cudaSuccess || current != device) {
      TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(cudaSetDevice(device));
    }
    auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, device));
    if (l.cluster[0] * l.cluster[1] * l.cluster[2] == 1) {
      TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(
          cuda_api::LaunchKernel(l.kernel, params, tvm::ffi::dim3(dims[0], dims[1], dims[2]),
                                 tvm::ffi::dim3(dims[3], dims[4], dims[5]), stream, l.dyn_smem));
      continue;
    }
    cudaLaunchConfig_t config = {};
    config.gridDim = {dims[0], dims[1], dims[2]};
    config.blockDim = {dims[3], dims[4], dims[5]};
    config.dynamicSmemBytes = l.dyn_smem;
    config.stream = stream;
    cudaLaunchAttribute cluster;
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim = {l.cluster[0], l.cluster[1], l.cluster[2]};
    config.attrs = &cluster;
    config.numAttrs = 1;
    TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(
        cudaLaunchKernelExC(&config, reinterpret_cast<const void*>(l.kernel), params));
  }
  if (b.dry) *rv = dry;
}

// load(image) -> library handle: a cubin or fatbin, kept for the process's life
int64_t Load(tvm::ffi::Bytes image) {
  cuda_api::LibraryHandle library = nullptr;
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(cuda_api::LoadLibrary(&library, image.data()));
  return reinterpret_cast<int64_t>(library);
}

// kernel(library, name, device, dyn_smem) -> kernel handle, its dynamic shared memory allowed
int64_t Kernel(int64_t library, tvm::ffi::String name, int device, int64_t dyn_smem) {
  cuda_api::KernelHandle kernel = nullptr;
  TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(cuda_api::GetKernel(
      &kernel, reinterpret_cast<cuda_api::LibraryHandle>(library), name.c_str()));
  if (dyn_smem > 48 * 1024) {
    TVM_FFI_CHECK_CUBIN_LAUNCHER_CUDA_ERROR(cuda_api::SetKernelMaxDynamicSharedMem(
        kernel, static_cast<int>(dyn_smem), cuda_api::GetDeviceHandle(device)));
  }
  return reinterpret_cast<int64_t>(kernel);
}

MapSpec ReadMap(const Array<int64_t>& w, size_t* at, int num_args) {
  size_t i = *at;
  MapSpec m;
  m.arg = static_cast<int>(w[i]);
  m.dtype = static_cast<CUtensorMapDataType>(w[i + 1]);
  m.rank = static_cast<cuuint32_t>(w[i + 2]);
  m.interleave = static_cast<CUtensorMapInterleave>(w[i + 3]);
  m.swizzle = static_cast<CUtensorMapSwizzle>(w[i + 4]);
  m.l2_promotion = static_cast<CUtensorMapL2promotion>(w[i + 5]);
  m.oob_fill = static_cast<CUtensorMapFloatOOBfill>(w[i + 6]);
  TVM_FFI_ICHECK(m.arg < num_args && m.rank >= 1 && m.rank <= 5);
  i += 7;
  for (cuuint32_t d = 0; d < m.rank; ++d) m.dims[d] = static_cast<cuuint64_t>(w[i++]);
  for (cuuint32_t d = 0; d + 1 < m.rank; ++d) m.strides[d] = static_cast<cuuint64_t>(w[i++]);
  for (cuuint32_t d = 0; d < m.rank; ++d) m.box[d] = static_cast<cuuint32_t>(w[i++]);
  for (cuuint32_t d = 0; d < m.rank; ++d) m.element_strides[d] = static_cast<cuuint32_t>(w[i++]);
  *at = i;
  return m;
}

// bind(name, num_args, checks, kernels, dims, params, maps, pinned, dry) -> the launcher
//   checks: per tensor argument [arg, device_type, device_id, code, bits, lanes, align, ndim,
//           shape...]; per launch: kernels[i] a kernel handle, dims[i] [grid xyz, block xyz,
//           dyn_smem, cluster xyz], params[i] (kind, value) pairs, maps[i] its MapSpecs;
//   pinned: (argument, value) pairs each call must repeat
Function Bind(tvm::ffi::String name, int num_args, Array<int64_t> checks, Array<int64_t> kernels,
              Array<Array<int64_t>> dims, Array<Array<int64_t>> params,
              Array<Array<int64_t>> maps, Array<int64_t> pinned, bool dry) {
  auto b = std::make_shared<Bound>();
  b->name = std::string(name);
  b->num_args = num_args;
  b->dry = dry;
  for (size_t i = 0; i + 1 < pinned.size(); i += 2) {
    TVM_FFI_ICHECK(pinned[i] < num_args);
    b->pinned.emplace_back(static_cast<int>(pinned[i]), pinned[i + 1]);
  }
  for (size_t i = 0; i < checks.size();) {
    TensorCheck c;
    c.arg = static_cast<int>(checks[i]);
    c.device = DLDevice{static_cast<DLDeviceType>(checks[i + 1]), static_cast<int>(checks[i + 2])};
    c.dtype = DLDataType{static_cast<uint8_t>(checks[i + 3]), static_cast<uint8_t>(checks[i + 4]),
                         static_cast<uint16_t>(checks[i + 5])};
    c.align = checks[i + 6];
    int64_t ndim = checks[i + 7];
    for (int64_t d = 0; d < ndim; ++d) c.shape.push_back(checks[i + 8 + d]);
    TVM_FFI_ICHECK(c.arg < num_args && c.align > 0);
    b->checks.push_back(c);
    i += 8 + ndim;
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    Array<int64_t> d = dims[k], p = params[k];
    Launch l;
    l.kernel = reinterpret_cast<cuda_api::KernelHandle>(kernels[k]);
    for (int j = 0; j < 6; ++j) {
      l.dims[j] = d[j];
      TVM_FFI_ICHECK(d[j] >= 0 || -d[j] - 1 < num_args);
    }
    l.dyn_smem = static_cast<uint32_t>(d[6]);
    for (int j = 0; j < 3; ++j) l.cluster[j] = static_cast<unsigned>(d[7 + j]);
    Array<int64_t> m = maps[k];
    for (size_t at = 0; at < m.size();) l.maps.push_back(ReadMap(m, &at, num_args));
    for (size_t j = 0; j + 1 < p.size(); j += 2) {
      bool in_range = p[j] == kTensorMap ? p[j + 1] < static_cast<int64_t>(l.maps.size())
                                          : p[j] > kI64 || p[j + 1] < num_args;
      TVM_FFI_ICHECK(in_range);
      l.params.emplace_back(p[j], p[j + 1]);
    }
    TVM_FFI_ICHECK(l.params.size() <= 64 && l.maps.size() <= 8);
    b->launches.push_back(l);
  }
  return Function::FromPacked([b](PackedArgs args, tvm::ffi::Any* rv) { Call(*b, args, rv); });
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(load, Load);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(kernel, Kernel);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(bind, Bind);
