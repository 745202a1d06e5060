#include "convert.hpp"

#include <pybind11/numpy.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>
#include <string>

#include "args.hpp"
#include "npugraph/error.hpp"

namespace npugraph::python {
namespace {

thread_local int g_internal_torch = 0;

// Marks npugraph's own torch calls (Note [Torch ops inside a capture] in npugraph/_graph.py).
struct InternalTorch {
  InternalTorch() { ++g_internal_torch; }
  ~InternalTorch() { --g_internal_torch; }
  InternalTorch(const InternalTorch&) = delete;
  InternalTorch& operator=(const InternalTorch&) = delete;
};

constexpr const char* kSupported =
    "supported: float32, float16, bfloat16 (torch tensors only), int8, uint8, int32, int64, bool";

// torch's dtype names for the dtypes npugraph has ("torch.float32", ...).
bool torch_dtype_supported(const std::string& name) {
  for (const char* n : {"torch.float32", "torch.float16", "torch.bfloat16", "torch.int8", "torch.uint8",
                        "torch.int32", "torch.int64", "torch.bool"})
    if (name == n) return true;
  return false;
}

// DLPack's ABI (dlpack.h v0.x, the version torch 1.13 speaks), declared here.
struct DLDevice { std::int32_t device_type; std::int32_t device_id; };
struct DLDataType { std::uint8_t code; std::uint8_t bits; std::uint16_t lanes; };
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr std::int32_t kDLCPU = 1, kDLCUDA = 2;
constexpr std::uint8_t kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6;

DType from_dl(DLDataType t, const char* arg) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return DType::f32;
    if (t.code == kDLFloat && t.bits == 16) return DType::f16;
    if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
    if (t.code == kDLInt && t.bits == 8) return DType::i8;
    if (t.code == kDLUInt && t.bits == 8) return DType::u8;
    if (t.code == kDLInt && t.bits == 32) return DType::i32;
    if (t.code == kDLInt && t.bits == 64) return DType::i64;
    if ((t.code == kDLBool || t.code == kDLUInt) && t.bits == 8) return DType::boolean;
  }
  NG_THROW(ArgumentError, arg, ": DLPack dtype (code ", int(t.code), ", bits ", int(t.bits), ", lanes ",
           t.lanes, ") is not supported");
}

DLDataType to_dl(DType t) {
  switch (t) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i8: return {kDLInt, 8, 1};
    case DType::u8: return {kDLUInt, 8, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::boolean: return {kDLBool, 8, 1};
  }
  return {kDLUInt, 8, 1};
}

// Drops a Python reference from any thread (storages may die where the GIL is not held).
// Note [Python references from workers]
// A tensor that wraps a Python object holds a reference to it. Queued and captured work keeps such
// tensors alive (Note [Keep-alive] in src/runtime/task.hpp), so the last reference may drop on a
// stream worker, which must never wait for the GIL: the main thread may hold it while it waits for
// that very worker (a stream's destructor joins it). So a reference dropped without the GIL is
// queued, and a pending call (Py_AddPendingCall needs no GIL) releases the queue on the main thread.
// At interpreter exit nothing is released (the objects' memory stays valid for queued work).
std::mutex g_pending_mu;
std::vector<PyObject*> g_pending;
bool g_drain_scheduled = false;

int drain_pending(void*) {
  std::vector<PyObject*> drop;
  {
    std::lock_guard lock(g_pending_mu);
    drop.swap(g_pending);
    g_drain_scheduled = false;
  }
  for (PyObject* p : drop) Py_DECREF(p);
  return 0;
}

void release_python(void* p) {
  if (!Py_IsInitialized()) return;
  if (PyGILState_Check()) {
    Py_DECREF(static_cast<PyObject*>(p));
    return;
  }
  std::lock_guard lock(g_pending_mu);
  g_pending.push_back(static_cast<PyObject*>(p));
  // A full pending-call queue: the next release (or drain) schedules it again.
  if (!g_drain_scheduled) g_drain_scheduled = Py_AddPendingCall(&drain_pending, nullptr) == 0;
}

std::shared_ptr<void> hold_python(py::handle obj) {
  PyObject* raw = obj.ptr();
  Py_INCREF(raw);
  return std::shared_ptr<void>(raw, &release_python);
}

// npugraph._npu_device.NpuTensor (a type-name compare: this is on every tensor argument's path).
bool is_npu_tensor(py::handle obj) { return std::strcmp(Py_TYPE(obj.ptr())->tp_name, "NpuTensor") == 0; }

bool is_torch(py::handle obj) {
  if (is_npu_tensor(obj)) return true;
  const std::string module = py::str(py::type::handle_of(obj).attr("__module__"));
  return module == "torch" || module.rfind("torch.", 0) == 0;
}

DType numpy_dtype(const py::dtype& dt, const char* arg) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 2) return DType::f16;
  if (kind == 'i' && size == 1) return DType::i8;
  if (kind == 'u' && size == 1) return DType::u8;
  if (kind == 'i' && size == 4) return DType::i32;
  if (kind == 'i' && size == 8) return DType::i64;
  if (kind == 'b' && size == 1) return DType::boolean;
  NG_THROW(ArgumentError, arg, ": numpy dtype ", py::str(static_cast<const py::handle&>(dt)).cast<std::string>(),
           " is not supported (", kSupported, ")");
}

py::dtype numpy_dtype_of(DType t) {
  switch (t) {
    case DType::f32: return py::dtype("float32");
    case DType::f16: return py::dtype("float16");
    case DType::i8: return py::dtype("int8");
    case DType::u8: return py::dtype("uint8");
    case DType::i32: return py::dtype("int32");
    case DType::i64: return py::dtype("int64");
    case DType::boolean: return py::dtype("bool");
    case DType::bf16: break;
  }
  NG_THROW(ArgumentError, "dtype = bfloat16: numpy has no bfloat16; pass a torch dtype to get a torch tensor");
}

}  // namespace

Kind kind_of(py::handle obj, const char* arg) {
  if (py::isinstance<py::array>(obj)) return Kind::numpy;
  if (is_torch(obj) && py::hasattr(obj, "__dlpack__"))
    return is_npu_tensor(obj) ? Kind::torch_npu : Kind::torch;
  throw py::type_error(std::string(arg) + ": expected a numpy array or a torch tensor, got " + type_name(obj) +
                       " (" + short_repr(obj) + ")");
}

bool in_internal_torch() { return g_internal_torch > 0; }

Tensor to_tensor(py::handle obj, const char* arg) {
  if (kind_of(obj, arg) == Kind::numpy) {
    auto arr = py::reinterpret_borrow<py::array>(obj);
    const DType dtype = numpy_dtype(arr.dtype(), arg);
    Shape shape, strides;
    const auto item = static_cast<py::ssize_t>(dtype_size(dtype));
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
      shape.push_back(arr.shape(i));
      NG_CHECK_ARG(arr.strides(i) % item == 0, arg, ": stride ", arr.strides(i),
                   " bytes is not a multiple of the element size");
      strides.push_back(arr.strides(i) / item);
    }
    NG_CHECK_ARG(arr.writeable(), arg, ": the numpy array is read-only");
    return Tensor::from_blob(arr.mutable_data(), shape, strides, dtype, hold_python(obj));
  }
  if (is_npu_tensor(obj))  // an npu tensor: its host data (Note [The npu device])
    return to_tensor(obj.attr("_npugraph_data"), arg);
  InternalTorch internal;
  NG_CHECK_ARG(!py::bool_(obj.attr("requires_grad")), arg,
               ": a torch tensor that requires grad cannot be shared; use .detach() or torch.no_grad()");
  const py::object torch_device = obj.attr("device");
  const std::string device = py::str(torch_device.attr("type"));
  NG_CHECK_ARG(device == "cpu" || device == "cuda", arg, ": torch tensor on device '", device,
               "': npugraph takes cpu and cuda tensors");
  // Note [torch CUDA tensors]
  // torch's kernels run on torch's current CUDA stream, npugraph's on its own streams: a tensor torch
  // has just written may still be in flight there. So a torch CUDA tensor is shared only once torch's
  // current stream of its device has finished (a host wait, as the eager calls' own at their end:
  // Note [Blocking replays from Python]). Results go back to torch after npugraph's stream finished.
  if (device == "cuda")
    py::module_::import("torch").attr("cuda").attr("current_stream")(torch_device).attr("synchronize")();
  const std::string dtype_name = py::str(obj.attr("dtype"));
  NG_CHECK_ARG(torch_dtype_supported(dtype_name), arg, ": torch dtype ", dtype_name, " is not supported (",
               kSupported, ")");
  // torch 1.13 cannot export bool through DLPack: share it as uint8 and keep the dtype.
  const bool is_bool = dtype_name == "torch.bool";
  py::object src = is_bool ? obj.attr("view")(py::module_::import("torch").attr("uint8"))
                           : py::reinterpret_borrow<py::object>(obj);
  py::capsule cap = src.attr("__dlpack__")();
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  if (m == nullptr) throw py::error_already_set();
  PyCapsule_SetName(cap.ptr(), "used_dltensor");
  std::shared_ptr<void> owner(m, [](void* p) {
    auto* mt = static_cast<DLManagedTensor*>(p);
    if (mt->deleter) mt->deleter(mt);
  });
  const DLTensor& t = m->dl_tensor;
  NG_CHECK_ARG(t.device.device_type == kDLCPU || t.device.device_type == kDLCUDA, arg,
               ": DLPack device type ", t.device.device_type, " is neither the cpu (1) nor CUDA (2)");
  const Device on = t.device.device_type == kDLCUDA ? Device::cuda(t.device.device_id) : Device::cpu();
  const DType dtype = is_bool ? DType::boolean : from_dl(t.dtype, arg);
  Shape shape, strides;
  for (int i = 0; i < t.ndim; ++i) shape.push_back(t.shape[i]);
  if (t.strides) {
    for (int i = 0; i < t.ndim; ++i) strides.push_back(t.strides[i]);
  } else {
    strides = contiguous_strides(shape);
  }
  return Tensor::from_blob(static_cast<char*>(t.data) + t.byte_offset, shape, strides, dtype, owner, on);
}

py::object from_tensor(const Tensor& t, Kind kind) {
  if (kind == Kind::numpy) {
    NG_CHECK_ARG(t.device().is_cpu(), "the result is on ", t.device().str(),
                 ": a numpy array holds host memory only (pass torch tensors, or a torch dtype, for ",
                 t.device().str(), " work)");
    std::vector<py::ssize_t> shape, strides;
    const auto item = static_cast<py::ssize_t>(t.element_size());
    for (int i = 0; i < t.dim(); ++i) {
      shape.push_back(t.shape()[i]);
      strides.push_back(t.strides()[i] * item);
    }
    auto* keep = new Tensor(t);
    py::capsule base(keep, [](void* p) { delete static_cast<Tensor*>(p); });
    return py::array(numpy_dtype_of(t.dtype()), shape, strides, t.data(), base);
  }
  struct Ctx {
    Tensor tensor;
    std::vector<std::int64_t> shape, strides;
    DLManagedTensor managed;
  };
  auto* ctx = new Ctx{t, {t.shape().begin(), t.shape().end()}, {t.strides().begin(), t.strides().end()}, {}};
  const bool is_bool = t.dtype() == DType::boolean;  // exported as uint8, viewed back as bool
  const DLDevice dl_device = t.device().is_cpu() ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, t.device().index()};
  ctx->managed.dl_tensor = DLTensor{t.data(), dl_device, t.dim(),
                                    is_bool ? to_dl(DType::u8) : to_dl(t.dtype()),
                                    ctx->shape.data(), ctx->strides.data(), 0};
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Ctx*>(self->manager_ctx); };
  py::capsule cap(&ctx->managed, "dltensor", [](PyObject* c) {
    // Still named "dltensor": nobody consumed it, so its deleter is ours to call.
    if (PyCapsule_IsValid(c, "dltensor")) {
      auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
      m->deleter(m);
    }
  });
  InternalTorch internal;
  // Leaked on purpose: a static py::object would be released after the interpreter is gone.
  static auto* from_dlpack = new py::object(py::module_::import("torch.utils.dlpack").attr("from_dlpack"));
  py::object result = (*from_dlpack)(cap);
  if (is_bool) result = result.attr("view")(py::module_::import("torch").attr("bool"));
  if (kind == Kind::torch_npu) {
    static auto* wrap = new py::object(py::module_::import("npugraph._npu_device").attr("wrap"));
    result = (*wrap)(result);
  }
  return result;
}

DType to_dtype(py::handle obj) {
  std::string name = py::str(obj);
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  if (name == "float32" || name == "float") return DType::f32;
  if (name == "float16" || name == "half") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "int8") return DType::i8;
  if (name == "uint8") return DType::u8;
  if (name == "int32" || name == "int") return DType::i32;
  if (name == "int64" || name == "long") return DType::i64;
  if (name == "bool") return DType::boolean;
  try {  // a numpy dtype or scalar type (np.float16, "f2", ...)
    return numpy_dtype(py::dtype::from_args(py::reinterpret_borrow<py::object>(obj)), "dtype");
  } catch (const py::error_already_set&) {
  } catch (const ArgumentError&) {
  }
  NG_THROW(ArgumentError, "dtype = ", std::string(py::str(obj)),
           ": must be float32, float16, bfloat16, int8, uint8, int32, int64 or bool");
}

Kind kind_of_dtype(py::handle obj) {
  const std::string name = py::str(obj);
  return name.rfind("torch.", 0) == 0 ? Kind::torch : Kind::numpy;
}

}  // namespace npugraph::python
