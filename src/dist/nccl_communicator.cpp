// Communicator::nccl: an NCCL communicator made over an MPI one (nccl_state.hpp). In a build
// without NCCL it is the refusal only.
//
// Note [NCCL communicator setup]: every rank first checks its own device through the runtime (the
// cuda backend's own UnsupportedError when no CUDA device is present) and rank 0 makes the
// ncclUniqueId; one MPI all-reduce of "ok" over the MPI communicator then lets every rank fail
// together when one cannot go on, instead of leaving the others waiting for it. The id is broadcast
// over MPI (libnccl is loaded in the local step, on every rank: a rank without it fails the vote
// too); ncclCommInitRankConfig runs nonblocking and is polled against the MPI communicator's
// deadline, so a rank that never arrives gives a TimeoutError, not a hang (the NCCL communicator
// is aborted). The MPI steps use the MPI communicator's deadline-bounded wait.
#include <chrono>
#include <cstring>
#include <thread>

#include "dist/comm_state.hpp"
#include "dist/nccl_api.hpp"
#include "dist/nccl_state.hpp"
#include "npugraph/error.hpp"
#include "npugraph/stream.hpp"

namespace npugraph::dist {

bool Communicator::nccl_built() { return NPUGRAPH_HAVE_NCCL != 0; }

#if !NPUGRAPH_HAVE_NCCL

Communicator Communicator::nccl(const Communicator& mpi, Device device) {
  NG_THROW(UnsupportedError, "dist::Communicator::nccl(", mpi.str(), ", ", device.str(), "): this build "
           "of npugraph::dist has no NCCL (it needs the CUDA backend, MPI and NCCL when CMake "
           "configures; NPUGRAPH_NCCL=ON makes a missing piece a configure error naming it)");
}

#else

namespace {

// The calling thread's current CUDA device, restored on exit.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    if (cudaGetDevice(&saved_) != cudaSuccess) saved_ = -1;
    (void)cudaSetDevice(device);
  }
  ~DeviceScope() {
    if (saved_ >= 0) (void)cudaSetDevice(saved_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int saved_ = -1;
};

// One nonblocking MPI collective on `mpi`, completed by its deadline-bounded wait.
void mpi_step(CommState& mpi, const char* what, int (*start)(CommState&, void*, MPI_Request*), void* arg) {
  MPI_Request req = MPI_REQUEST_NULL;
  {
    impl::MpiLock lock;
    impl::check_mpi(start(mpi, arg, &req), what, mpi, "Communicator::nccl");
  }
  impl::wait_for(mpi, req, npugraph::detail::cat("Communicator::nccl's ", what));
}

}  // namespace

NcclState::~NcclState() {
  if (comm) (void)impl::nccl().comm_abort(comm);
  if (done) (void)cudaEventDestroy(done);
}

namespace impl {

void check_nccl(ncclResult_t rc, const char* call, const CommState& s, const char* op) {
  if (rc == ncclSuccess || rc == ncclInProgress) [[likely]] return;
  const NcclApi& api = nccl();
  const char* last = api.get_last_error(s.nccl ? s.nccl->comm : nullptr);
  NG_THROW(StateError, "dist ", op, " on ", s.str(), ": ", call, " failed: ", api.get_error_string(rc),
           last && *last ? " (" : "", last ? last : "", last && *last ? ")" : "");
}

void settle(CommState& s, const char* call, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(s.timeout_ms.load());
  for (;;) {
    ncclResult_t state = ncclSuccess;
    check_nccl(impl::nccl().comm_get_async_error(s.nccl->comm, &state), "ncclCommGetAsyncError", s, call);
    if (state != ncclInProgress) return check_nccl(state, call, s, what.c_str());
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::yield();
  }
  (void)impl::nccl().comm_abort(s.nccl->comm);
  s.nccl->comm = nullptr;
  NG_THROW(TimeoutError, break_on_timeout(s, what));
}

}  // namespace impl

Communicator Communicator::nccl(const Communicator& mpi, Device device) {
  const std::string where =
      npugraph::detail::cat("dist::Communicator::nccl(", mpi.str(), ", ", device.str(), ")");
  NG_CHECK_ARG(!mpi.is_nccl(), where, ": mpi must be an MPI communicator (the ranks agree on the NCCL "
               "id over MPI), not an NCCL one");
  NG_CHECK_ARG(device.type() == DeviceType::cuda, where, ": device = ", device.str(), ": must be a cuda "
               "device (NCCL runs on GPUs; the cpu's collectives are the MPI communicator's)");
  CommState& m = *mpi.state();
  const impl::InFlight flight(m, "Communicator::nccl");

  // The local checks, then one vote (Note [NCCL communicator setup]).
  std::string local;
  bool unsupported = false;
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  try {
    (void)Stream::default_stream(device);  // the runtime's error when the device is not usable
    (void)impl::nccl();                    // libnccl, loaded on every rank (Note [NCCL is loaded ...])
    if (m.rank == 0)
      impl::check_nccl(impl::nccl().get_unique_id(&id), "ncclGetUniqueId", m, "Communicator::nccl");
  } catch (const Error& e) {
    local = e.what();
    unsupported = e.kind() == ErrorKind::unsupported;
  }
  int vote[2] = {local.empty() ? 1 : 0, 0};
  mpi_step(m, "MPI_Iallreduce (device check)", [](CommState& c, void* v, MPI_Request* r) {
    int* p = static_cast<int*>(v);
    return MPI_Iallreduce(&p[0], &p[1], 1, MPI_INT, MPI_MIN, c.comm, r);
  }, vote);
  if (unsupported) NG_THROW(UnsupportedError, where, ": ", local);
  NG_CHECK_STATE(local.empty(), where, ": ", local);
  NG_CHECK_STATE(vote[1] == 1, where, ": another rank could not use its device for NCCL (it reports "
                 "why); no NCCL communicator was made");
  mpi_step(m, "MPI_Ibcast (ncclUniqueId)", [](CommState& c, void* v, MPI_Request* r) {
    return MPI_Ibcast(v, static_cast<int>(sizeof(ncclUniqueId)), MPI_BYTE, 0, c.comm, r);
  }, &id);

  auto s = std::make_shared<CommState>();
  s->rank = m.rank;
  s->size = m.size;
  s->device = device;
  s->timeout_ms.store(m.timeout_ms.load());
  s->nccl = std::make_shared<NcclState>();
  s->nccl->device = device.index();
  const DeviceScope on(device.index());
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  impl::check_nccl(impl::nccl().comm_init_rank_config(&s->nccl->comm, s->size, id, s->rank, &config),
                   "ncclCommInitRankConfig", *s, "Communicator::nccl");
  impl::settle(*s, "ncclCommInitRankConfig", "Communicator::nccl's ncclCommInitRank");
  if (cudaEventCreateWithFlags(&s->nccl->done, cudaEventDisableTiming) != cudaSuccess)
    NG_THROW(StateError, where, ": cudaEventCreateWithFlags failed: ", cudaGetErrorString(cudaGetLastError()));
  return Communicator(std::move(s));
}

#endif  // NPUGRAPH_HAVE_NCCL

}  // namespace npugraph::dist
