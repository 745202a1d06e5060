#include "npugraph/stream.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "runtime/mem_pool.hpp"
#include "npugraph/error.hpp"
#include "npugraph/event.hpp"
#include "npugraph/external_event.hpp"
#include "runtime/stall.hpp"
#include "runtime/stream_state.hpp"

namespace npugraph::detail {
namespace {

std::atomic<bool> g_exiting{false};

// Every live stream, for device_synchronize and an orderly shutdown at exit.
struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<StreamState>> streams;
  std::shared_ptr<StreamState> default_cpu;
  std::vector<std::shared_ptr<StreamState>> default_cuda;  // by device index, made on first use
  std::mutex default_mu;                                   // guards default_cuda
  std::uint64_t next_id = 1;

  ~Registry() {
    g_exiting.store(true);
    std::vector<std::shared_ptr<StreamState>> live;
    {
      std::lock_guard lock(mu);
      for (auto& w : streams)
        if (auto s = w.lock()) live.push_back(std::move(s));
    }
    for (auto& s : live) s->queue->shutdown();
  }

  std::vector<std::shared_ptr<StreamState>> snapshot(Device device) {
    std::lock_guard lock(mu);
    std::vector<std::shared_ptr<StreamState>> out;
    for (auto& w : streams)
      if (auto s = w.lock(); s && s->device == device) out.push_back(std::move(s));
    return out;
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

std::shared_ptr<StreamState> make_stream(Device device, StreamOptions options, bool is_default) {
  Backend& backend = backend_for(device);
  NG_CHECK_ARG(options.num_threads >= 0, "Stream::create: num_threads = ", options.num_threads,
               ": must be >= 0 (0: the machine's cores)");
  const int threads = options.num_threads ? options.num_threads : backend.default_num_threads();
  Registry& r = registry();
  std::uint64_t id;
  {
    std::lock_guard lock(r.mu);
    id = is_default ? 0 : r.next_id++;
  }
  auto state = std::make_shared<StreamState>(device, id, threads, backend);
  state->self = state;
  state->queue = backend.create_queue(state);
  std::lock_guard lock(r.mu);
  std::erase_if(r.streams, [](const auto& w) { return w.expired(); });
  r.streams.push_back(state);
  return state;
}

// Each device has its default stream: the cpu's has id 0; a CUDA device's is made on first use and
// has an id of its own (stream ids are unique across devices: the pools key reuse by them).
const std::shared_ptr<StreamState>& default_state(Device device) {
  backend_for(device);  // throws for a device this build or this machine cannot serve
  Registry& r = registry();
  if (device.is_cpu()) {
    static std::once_flag once;
    std::call_once(once, [&] { r.default_cpu = make_stream(device, {}, true); });
    return r.default_cpu;
  }
  std::lock_guard lock(r.default_mu);
  const auto i = static_cast<std::size_t>(device.index());
  if (r.default_cuda.size() <= i) r.default_cuda.resize(i + 1);
  if (!r.default_cuda[i]) r.default_cuda[i] = make_stream(device, {}, false);
  return r.default_cuda[i];
}

// The current stream, per device kind (a CUDA stream made current leaves the cpu's alone).
thread_local Stream t_current{nullptr};
thread_local Stream t_current_cuda{nullptr};
thread_local Stream t_other_cuda{nullptr};  // current_stream_ref of a device t_current_cuda is not on

// Waits for `s` to finish what was issued before the call; throws on stalls (Note [Stalls]),
// timeouts and task errors.
void sync_stream(StreamState& s, std::optional<std::chrono::milliseconds> timeout) {
  using clock = std::chrono::steady_clock;
  const std::uint64_t target = s.queue->submitted();
  struct Counted {  // StreamState::synchronizing, for the whole wait (exceptions included)
    std::atomic<int>& n;
    explicit Counted(std::atomic<int>& c) : n(c) { n.fetch_add(1, std::memory_order_relaxed); }
    ~Counted() { n.fetch_sub(1, std::memory_order_relaxed); }
  } counted(s.synchronizing);
  const auto start = clock::now();
  const auto until = timeout ? saturating_deadline(start, *timeout) : clock::time_point::max();
  for (;;) {
    const auto slice = std::min(clock::now() + std::chrono::milliseconds(20), until);
    if (s.queue->wait_completed(target, slice)) break;
    raise_if_stalled(s, &s, s.str() + ": synchronize");
    if (timeout && clock::now() >= until)
      NG_THROW(TimeoutError, s.str(), ": synchronize timed out after ", timeout->count(), " ms with ",
               s.queue->completed(), " of ", target, " tasks done");
  }
  if (auto error = s.take_timeout()) NG_THROW(TimeoutError, *error);
  if (auto error = s.take_error()) NG_THROW(TaskError, s.str(), ": ", *error);
}

}  // namespace

StreamState::StreamState(Device d, std::uint64_t i, int threads, Backend& b)
    : device(d), id(i), num_threads(threads), backend(b) {}

StreamState::~StreamState() {
  closing.store(true);
  if (update) {  // destroyed mid-update: free the handle (nothing is installed)
    RuntimeLock lock;
    if (update) update->abandon(*this);
  }
  if (queue) queue->shutdown();
  delete spare_update.exchange(nullptr);
}

std::string StreamState::str() const {
  return device.str() + (id == 0 ? std::string(" default stream") : " stream " + std::to_string(id));
}

void StreamState::report_error(const std::string& message) noexcept {
  std::lock_guard lock(mu_);
  if (errors_++ == 0) {
    try {
      error_ = message;
    } catch (...) {
    }
  }
}

std::optional<std::string> StreamState::take_error() {
  std::lock_guard lock(mu_);
  if (errors_ == 0) return std::nullopt;
  std::string message = std::move(error_);
  if (errors_ > 1) message += " (and " + std::to_string(errors_ - 1) + " more task errors)";
  errors_ = 0;
  error_.clear();
  return message;
}

std::mutex& runtime_mutex() {
  static std::mutex m;
  return m;
}

namespace {
thread_local RuntimeLock* t_runtime_lock = nullptr;
}

RuntimeLock::RuntimeLock() : lock_(runtime_mutex()) { t_runtime_lock = this; }

RuntimeLock::~RuntimeLock() { unlock(); }

void RuntimeLock::unlock() {
  if (!lock_.owns_lock()) return;
  t_runtime_lock = nullptr;
  lock_.unlock();
  graveyard_.clear();  // destructors run here, unlocked
}

bool runtime_lock_held() { return t_runtime_lock != nullptr; }

void defer_release(std::shared_ptr<void> object) {
  if (t_runtime_lock && object) t_runtime_lock->graveyard_.push_back(std::move(object));
}

StreamState& state_of(const Stream& stream) {
  NG_CHECK_ARG(stream.impl() != nullptr, "stream: undefined handle");
  return *stream.impl();
}

bool runtime_exiting() { return g_exiting.load(std::memory_order_relaxed); }

Stream& current_slot(Device device) { return device.is_cpu() ? t_current : t_current_cuda; }

const Stream& current_cpu() {
  if (!t_current.impl()) [[unlikely]] t_current = Stream(default_state(Device::cpu()));
  return t_current;
}

std::shared_ptr<StreamState> current_state() { return current_cpu().impl(); }

std::shared_ptr<StreamState> current_state(Device device) {
  if (device.is_cpu()) return current_state();
  const auto& slot = current_slot(device).impl();
  if (slot && slot->device == device) return slot;
  return default_state(device);
}

}  // namespace npugraph::detail

namespace npugraph {

using detail::state_of;

Stream Stream::create(Device device, StreamOptions options) {
  return Stream(detail::make_stream(device, options, false));
}

Stream Stream::default_stream(Device device) { return Stream(detail::default_state(device)); }

Device Stream::device() const { return state_of(*this).device; }
std::uint64_t Stream::id() const { return state_of(*this).id; }
int Stream::num_threads() const { return state_of(*this).num_threads; }
std::string Stream::str() const { return state_of(*this).str(); }

void Stream::synchronize() const {
  auto& s = state_of(*this);
  detail::check_sync_call("Stream::synchronize", &s);
  detail::sync_stream(s, std::nullopt);
}

void Stream::synchronize(std::chrono::milliseconds timeout) const {
  auto& s = state_of(*this);
  NG_CHECK_ARG(timeout.count() >= 0, "Stream::synchronize: timeout = ", timeout.count(),
               " ms: must be >= 0");
  detail::check_sync_call("Stream::synchronize", &s);
  detail::sync_stream(s, timeout);
}

bool Stream::query() const {
  auto& s = state_of(*this);
  detail::check_sync_call("Stream::query", &s);
  return s.queue->completed() >= s.queue->submitted();
}

void Stream::wait(const Stream& other) const {
  Event e;
  e.record(other);
  e.wait(*this);
}

bool Stream::is_capturing() const {
  return state_of(*this).mode.load() == detail::StreamMode::capturing;
}

std::uint64_t Stream::capture_mark() const {
  const detail::StreamState& s = state_of(*this);
  return s.mode.load() == detail::StreamMode::capturing ? s.capture_mark.load(std::memory_order_acquire) : 0;
}

bool Stream::is_updating() const {
  return state_of(*this).mode.load() == detail::StreamMode::updating;
}

const Stream& current_stream_ref(Device device) {
  if (device.is_cpu()) return detail::current_cpu();
  const Stream& slot = detail::current_slot(device);
  if (slot.impl() && slot.impl()->device == device) return slot;
  detail::t_other_cuda = current_stream(device);
  return detail::t_other_cuda;
}

Stream current_stream(Device device) {
  if (device.is_cpu()) return detail::current_cpu();
  try {
    return Stream(detail::current_state(device));
  } catch (const UnsupportedError& e) {
    NG_THROW(UnsupportedError, "current_stream: ", e.what());
  }
}

void set_current_stream(const Stream& stream) {
  detail::current_slot(state_of(stream).device) = stream;
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device())) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { detail::current_slot(previous_.device()) = previous_; }

void device_synchronize(Device device) {
  detail::check_sync_call("device_synchronize", nullptr);
  std::exception_ptr first;
  for (auto& s : detail::registry().snapshot(device)) {
    if (s->mode.load() == detail::StreamMode::capturing) continue;  // its work is recorded, not run
    try {
      detail::sync_stream(*s, std::nullopt);
    } catch (const Error&) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

// The registry counts the GPUs (detail::cuda_device_count, backends/registry.cpp: the runtime's seam).
int device_count(DeviceType type) noexcept { return type == DeviceType::cpu ? 1 : detail::cuda_device_count(); }

}  // namespace npugraph
