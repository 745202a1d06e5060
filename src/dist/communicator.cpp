// dist::init / finalize, the Communicator, and the deadline-bounded wait every collective uses
// (comm_state.hpp). Note [MPI thread level]: the collectives' MPI calls run on stream workers (and,
// inside a parallel graph, on compute-pool threads), never on the thread that issued them. With
// MPI_THREAD_MULTIPLE they call MPI directly; with MPI_THREAD_SERIALIZED every npugraph MPI call
// holds one process-wide lock, and the caller must not call MPI itself while npugraph collectives
// may run (synchronize first); FUNNELED and SINGLE are refused (docs/dist.md, "Threads").
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "dist/comm_state.hpp"
#include "npugraph/error.hpp"

namespace npugraph::dist {
namespace {

std::mutex g_mpi_mu;                    // the MPI_THREAD_SERIALIZED lock
std::atomic<int> g_level{-1};           // MPI_Query_thread, once MPI is initialized
std::atomic<bool> g_we_initialized{false};

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown MPI thread level";
  }
}

int thread_level() {
  NG_CHECK_STATE(is_initialized(), "dist: MPI is not initialized (or already finalized): call "
                 "npugraph::dist::init() (or MPI_Init_thread with MPI_THREAD_MULTIPLE) before making "
                 "a Communicator");
  int level = g_level.load();
  if (level >= 0) return level;
  MPI_Query_thread(&level);
  NG_CHECK_STATE(level >= MPI_THREAD_SERIALIZED, "dist: MPI thread level = ", level_name(level),
                 ": npugraph's collectives run on stream worker threads and need MPI_THREAD_MULTIPLE "
                 "(or MPI_THREAD_SERIALIZED); initialize MPI with MPI_Init_thread(..., "
                 "MPI_THREAD_MULTIPLE, ...) or npugraph::dist::init()");
  g_level.store(level);
  return level;
}

bool finalized() {
  int f = 0;
  MPI_Finalized(&f);
  return f != 0;
}

std::string deadline_text(std::int64_t ms) {
  return ms % 1000 == 0 ? npugraph::detail::cat(ms / 1000, " s") : npugraph::detail::cat(ms, " ms");
}

}  // namespace

bool is_initialized() {
  int i = 0;
  MPI_Initialized(&i);
  return i != 0 && !finalized();
}

int init(int* argc, char*** argv) {
  NG_CHECK_STATE(!finalized(), "dist::init: MPI is already finalized (MPI cannot be initialized twice)");
  if (!is_initialized()) {
    int provided = 0;
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    NG_CHECK_STATE(rc == MPI_SUCCESS, "dist::init: MPI_Init_thread failed with code ", rc);
    g_we_initialized.store(true);
  }
  return thread_level();
}

void finalize() {
  if (g_we_initialized.exchange(false) && is_initialized()) MPI_Finalize();
}

std::chrono::milliseconds default_timeout() {
  const char* env = std::getenv("NPUGRAPH_DIST_TIMEOUT_S");
  if (!env || !*env) return std::chrono::milliseconds(60000);
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(env, &end);
  NG_CHECK_ARG(errno == 0 && end && *end == '\0' && std::isfinite(s) && s > 0 && s < 1e9,
               "NPUGRAPH_DIST_TIMEOUT_S = \"", env, "\": must be a number of seconds > 0");
  return std::chrono::milliseconds(std::max<std::int64_t>(1, std::llround(s * 1000)));
}

CommState::~CommState() {
  if (comm == MPI_COMM_NULL || !is_initialized()) return;
  impl::MpiLock lock;
  // A timed-out collective may still complete if its late ranks joined; never wait for it here.
  for (MPI_Request& r : abandoned) {
    int done = 0;
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&comm);  // deallocated by MPI once pending operations complete
}

std::string CommState::str() const {
  if (nccl) return npugraph::detail::cat("NCCL communicator (rank ", rank, " of ", size, " on ", device.str(), ")");
  return npugraph::detail::cat("communicator (rank ", rank, " of ", size, ")");
}

namespace impl {

MpiLock::MpiLock() : held_(g_level.load() == MPI_THREAD_SERIALIZED) {
  if (held_) g_mpi_mu.lock();
}
MpiLock::~MpiLock() {
  if (held_) g_mpi_mu.unlock();
}

void check_mpi(int rc, const char* call, const CommState& s, const char* op) {
  if (rc == MPI_SUCCESS) [[likely]] return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  NG_THROW(StateError, "dist ", op, " on ", s.str(), ": ", call, " failed: ", text);
}

InFlight::InFlight(CommState& s, const char* op) : s_(s) {
  // MPI calls after MPI_Finalize are undefined (Open MPI aborts): refuse them.
  NG_CHECK_STATE(!finalized(), "dist ", op, " on ", s.str(), ": MPI is finalized (dist::finalize or "
                 "MPI_Finalize ran before this collective; synchronize the streams first)");
  check_not_broken(s, op);
  NG_CHECK_STATE(!s.in_flight.exchange(true), "dist ", op, " on ", s.str(),
                 ": another collective on this communicator is in flight in this process: the "
                 "collectives of one communicator must run one after another in the same order on "
                 "every rank (one stream, or ordered by events; never on parallel graph branches)");
}
InFlight::~InFlight() { s_.in_flight.store(false); }

void wait_for(CommState& s, MPI_Request& req, const std::string& what) {
  const std::int64_t ms = s.timeout_ms.load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    int done = 0;
    {
      MpiLock lock;
      check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test", s, what.c_str());
    }
    if (done) return;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    // Every MPI_Test advances the nonblocking algorithm's rounds: poll (yielding the core, which
    // ranks often share) for the first 100 ms, the span of any healthy collective here; then a
    // late rank is likely, so sleep between polls (20 us, after 1 s 1 ms) until the deadline.
    const auto waited = now - start;
    if (waited < std::chrono::milliseconds(100)) std::this_thread::yield();
    else if (waited < std::chrono::seconds(1)) std::this_thread::sleep_for(std::chrono::microseconds(20));
    else std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  {
    std::lock_guard lock(s.mu);
    s.abandoned.push_back(req);
  }
  NG_THROW(TimeoutError, break_on_timeout(s, what));
}

std::string break_on_timeout(CommState& s, const std::string& what) {
  std::string reason = npugraph::detail::cat(what, " timed out after ", deadline_text(s.timeout_ms.load()));
  {
    std::lock_guard lock(s.mu);
    s.broken_reason = reason;
  }
  s.is_broken.store(true);
  return npugraph::detail::cat("dist ", reason, " on ", s.str(), " waiting for the other ranks (a rank "
                               "that failed, exited, or skipped or reordered this collective; deadline: "
                               "the communicator's timeout, NPUGRAPH_DIST_TIMEOUT_S)");
}

void check_not_broken(CommState& s, const char* op) {
  if (!s.is_broken.load()) return;
  std::lock_guard lock(s.mu);
  NG_THROW(StateError, "dist ", op, " on ", s.str(), ": the communicator is broken: ", s.broken_reason,
           ", and ", s.nccl ? "NCCL aborted it" : "MPI cannot cancel a collective",
           "; make a new communicator (all ranks) or exit");
}

}  // namespace impl

Communicator::Communicator(MPI_Comm comm) {
  (void)thread_level();
  NG_CHECK_ARG(comm != MPI_COMM_NULL, "dist::Communicator: comm = MPI_COMM_NULL: must be a communicator");
  auto s = std::make_shared<CommState>();
  {
    impl::MpiLock lock;
    impl::check_mpi(MPI_Comm_dup(comm, &s->comm), "MPI_Comm_dup", *s, "Communicator");
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->size);
  }
  s->timeout_ms.store(default_timeout().count());
  state_ = std::move(s);
}

Communicator::Communicator(std::shared_ptr<CommState> state) : state_(std::move(state)) {}

Communicator Communicator::world() { return Communicator(MPI_COMM_WORLD); }

int Communicator::rank() const { return state_->rank; }
int Communicator::size() const { return state_->size; }
MPI_Comm Communicator::mpi_comm() const { return state_->comm; }
Device Communicator::device() const { return state_->device; }
bool Communicator::is_nccl() const { return state_->nccl != nullptr; }
std::chrono::milliseconds Communicator::timeout() const {
  return std::chrono::milliseconds(state_->timeout_ms.load());
}
void Communicator::set_timeout(std::chrono::milliseconds timeout) {
  NG_CHECK_ARG(timeout.count() > 0, "Communicator::set_timeout: timeout = ", timeout.count(),
               " ms: must be > 0");
  state_->timeout_ms.store(timeout.count());
}
bool Communicator::broken() const { return state_->is_broken.load(); }
std::string Communicator::str() const { return state_->str(); }

}  // namespace npugraph::dist
