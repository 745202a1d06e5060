// The C++ half of the npu device on torch 2.3-2.7 (Note [The npu device on torch 2.3-2.7] in
// npugraph/_npu_device_ext.py, which compiles this file against the installed torch and loads it).
//
// torch >= 2.8 lets Python give the PrivateUse1 key a device guard and accelerator hooks; older
// torches only take them from C++. This file supplies exactly those two objects, nothing else: the
// tensors, factories and copies stay the Python wrapper subclass of npugraph/_npu_device.py.
//
// npugraph's device is the host: one device (npu:0), whose work runs synchronously on the calling
// thread, so there is one stream (the default one, id 0), streams and events are always complete,
// and there is nothing to synchronize.
//
// Built by g++ with no project warnings flags against headers whose interfaces change between torch
// releases, so the methods that some torches lack carry no `override`: where this torch's base
// class has no such method, it is an unused member instead of a compile error (the file compiles
// against torch 2.1.2, 2.3.1, 2.4.1 and 2.7.1).
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/Stream.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace {

constexpr c10::DeviceType kNpu = c10::DeviceType::PrivateUse1;

c10::Device check_device(c10::Device d) {
  TORCH_CHECK(d.type() == kNpu, "npugraph's npu device guard was handed a ", d.type(), " device");
  TORCH_CHECK(!d.has_index() || d.index() == 0, "device = ", d, ": npugraph has one device, npu:0");
  return c10::Device(kNpu, 0);
}

c10::Stream default_stream(c10::Device d) { return c10::Stream(c10::Stream::DEFAULT, check_device(d)); }

struct NpuGuard final : c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }
  c10::Device exchangeDevice(c10::Device d) const override {
    check_device(d);
    return c10::Device(kNpu, 0);
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, 0); }
  void setDevice(c10::Device d) const override { check_device(d); }
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNpu, 0));
  }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return default_stream(d); }
  c10::Stream exchangeStream(c10::Stream) const noexcept override {
    return c10::Stream(c10::Stream::DEFAULT, c10::Device(kNpu, 0));
  }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  // Events: work on the host is done when the call returns, so an event is complete once recorded.
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
  // not in every torch 2.3-2.7 (no `override`, see the top of the file)
  void synchronizeEvent(void*) const {}
  void synchronizeDevice(const c10::DeviceIndex) const {}
};

// The guard registers itself when the library is loaded, as torch's own backends do.
C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuard);

// What torch asks the accelerator (autograd's stream bookkeeping asks hasPrimaryContext for every
// device of the accelerator). Anything else keeps torch's default, which says it is not
// implemented for this backend.
struct NpuHooks final : at::PrivateUse1HooksInterface {
  bool hasPrimaryContext(c10::DeviceIndex) const { return true; }
  bool isAvailable() const { return true; }
  bool isBuilt() const { return true; }
  void initPrivateUse1() const {}
  void init() const {}
};

std::string last_error;

}  // namespace

#ifdef NPUGRAPH_AUTOCAST_STATE_IN_MODULE
// torch 2.3's torch.autocast hands a named device's autocast state to its Python device module;
// the dispatcher reads it from these (ATen/autocast_mode.h, declared here to spare the compile
// ATen's umbrella header). The device module passes it on.
namespace at::autocast {
TORCH_API void set_privateuseone_enabled(bool enabled);
TORCH_API void set_autocast_privateuseone_dtype(c10::ScalarType dtype);
}  // namespace at::autocast

extern "C" void npugraph_npu_set_autocast(int enabled, int dtype) {
  at::autocast::set_privateuseone_enabled(enabled != 0);
  at::autocast::set_autocast_privateuseone_dtype(static_cast<c10::ScalarType>(dtype));
}
#endif

// Registers the hooks (torch allows it once per process); returns nullptr, or what went wrong.
extern "C" const char* npugraph_npu_register_hooks() {
  static NpuHooks hooks;
  try {
    at::RegisterPrivateUse1HooksInterface(&hooks);
    return nullptr;
  } catch (const c10::Error& e) {
    last_error = e.what_without_backtrace();
    return last_error.c_str();
  } catch (const std::exception& e) {
    last_error = e.what();
    return last_error.c_str();
  }
}
