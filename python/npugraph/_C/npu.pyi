"""
streams, events, graphs, task groups (torch.npu names)
"""
from __future__ import annotations
from npugraph._graph import graph
from npugraph._npu_api import MemPool
from npugraph._npu_api import _launch_host_func
from npugraph._npu_api import _sleep
from npugraph._npu_api import _subscribe_report
from npugraph._npu_api import _unsubscribe_report
from npugraph._npu_api import device
from npugraph._npu_api import empty_cache
from npugraph._npu_api import get_device_name
from npugraph._npu_api import get_device_properties
from npugraph._npu_api import get_rng_state
from npugraph._npu_api import initial_seed
from npugraph._npu_api import is_bf16_supported
from npugraph._npu_api import is_current_stream_capturing
from npugraph._npu_api import make_graphed_callables
from npugraph._npu_api import manual_seed
from npugraph._npu_api import manual_seed_all
from npugraph._npu_api import max_memory_allocated
from npugraph._npu_api import max_memory_reserved
from npugraph._npu_api import mem_get_info
from npugraph._npu_api import memory_allocated
from npugraph._npu_api import memory_reserved
from npugraph._npu_api import memory_snapshot
from npugraph._npu_api import memory_stats
from npugraph._npu_api import reset_accumulated_memory_stats
from npugraph._npu_api import reset_peak_memory_stats
from npugraph._npu_api import seed
from npugraph._npu_api import seed_all
from npugraph._npu_api import set_compile_mode
from npugraph._npu_api import set_rng_state
from npugraph._npu_api import use_mem_pool
from npugraph import _npugraph_handlers
from npugraph._npugraph_handlers import NpuGraphOpHandler
from npugraph._npugraph_handlers import register_npu_graph_handler
from npugraph import _npugraph_utils
from npugraph._pinned import host_empty_cache
from npugraph._pinned import host_memory_stats
from npugraph._pinned import host_memory_stats_as_nested_dict
from npugraph._pinned import reset_accumulated_host_memory_stats
from npugraph._pinned import reset_peak_host_memory_stats
import typing
__all__: list[str] = ['Event', 'ExternalEvent', 'MAX_EXTERNAL_WAIT_DEADLINE', 'MemPool', 'NPUGraph', 'NpuGraphOpHandler', 'Stream', 'current_device', 'current_stream', 'default_external_wait_deadline', 'default_stream', 'device', 'device_count', 'empty_cache', 'get_device_name', 'get_device_properties', 'get_rng_state', 'graph', 'graph_pool_handle', 'graph_task_group_begin', 'graph_task_group_end', 'graph_task_update_abort', 'graph_task_update_begin', 'graph_task_update_end', 'host_empty_cache', 'host_memory_stats', 'host_memory_stats_as_nested_dict', 'initial_seed', 'is_available', 'is_bf16_supported', 'is_current_stream_capturing', 'launch_host_func', 'make_graphed_callables', 'manual_seed', 'manual_seed_all', 'max_memory_allocated', 'max_memory_reserved', 'mem_get_info', 'memory_allocated', 'memory_reserved', 'memory_snapshot', 'memory_stats', 'register_npu_graph_handler', 'reset_accumulated_host_memory_stats', 'reset_accumulated_memory_stats', 'reset_peak_host_memory_stats', 'reset_peak_memory_stats', 'seed', 'seed_all', 'set_compile_mode', 'set_default_external_wait_deadline', 'set_device', 'set_rng_state', 'set_stream', 'stream', 'synchronize', 'total_collapsed_records', 'use_mem_pool']
class Event:
    """
    A stream event (torch.npu.Event).
    """
    def __init__(self, enable_timing: typing.Any = False, blocking: typing.Any = False, interprocess: typing.Any = False) -> None:
        ...
    def elapsed_time(self, end_event: typing.Any) -> float:
        """
        Milliseconds between this event and end_event; both need Event(enable_timing=True).
        """
    def query(self) -> bool:
        """
        True when the last record has completed (or the event was never recorded).
        """
    def record(self, stream: typing.Any = None) -> None:
        """
        Records the event on `stream` (default: the current one): it completes when the work issued there before it has run.
        """
    def synchronize(self) -> None:
        """
        Waits for the last record to complete; raises WaitTimeoutError if the recording stream is stalled in an ExternalEvent wait past its deadline.
        """
    def wait(self, stream: typing.Any = None) -> None:
        """
        Orders later work on `stream` (default: the current one) after this event's last record.
        """
class ExternalEvent:
    """
    A binary signal across the graph boundary: record sets it, wait blocks the stream until it is set and clears it, reset clears it.
    """
    def __init__(self, name: typing.Any = '') -> None:
        ...
    def collapsed_records(self) -> int:
        """
        How many records of this event found it already set (each delivered nothing).
        """
    def is_set(self) -> bool:
        """
        True when the signal is set now (a snapshot).
        """
    def record(self, stream: typing.Any = None) -> None:
        """
        Sets the signal when `stream` (default: the current one) reaches this point. Recording an event that is already set delivers nothing new (a collapsed record: counted, reported).
        """
    def reset(self, stream: typing.Any = None) -> None:
        """
        Clears the signal when `stream` (default: the current one) reaches this point.
        """
    def set_wait_deadline(self, seconds: typing.Any) -> None:
        """
        How long (seconds) a wait on this event may block before it is reported and the waiting stream's synchronize raises WaitTimeoutError. A finite number >= 0, rounded to the millisecond; values above 1e8 s (about 3 years) mean 1e8 s.
        """
    def wait(self, stream: typing.Any = None) -> None:
        """
        Blocks `stream` (default: the current one; captured into a graph inside a capture) until the signal is set, then consumes it. A wait past the deadline is reported and the waiting stream's synchronize raises WaitTimeoutError.
        """
    @property
    def name(self) -> str:
        ...
    @property
    def wait_deadline(self) -> float:
        """
        This event's wait deadline in seconds (the default one unless set).
        """
class NPUGraph:
    """
    A captured graph of stream work (torch_npu.npu.NPUGraph).
    """
    def __init__(self, *, keep_graph: typing.Any = False) -> None:
        """
        A graph to capture into (torch_npu.npu.NPUGraph / torch.cuda.CUDAGraph). npugraph always keeps the captured graph next to its executable form, so keep_graph only records the choice: instantiate() is accepted either way and replay() needs no explicit instantiate.
        """
    def capture_begin(self, pool = None, capture_error_mode = 'global'):
        """
        Begins capturing the current stream (which must not be the default stream) into this graph,
            with the torch ops this thread issues on it (torch.cuda.CUDAGraph.capture_begin).
        """
    def capture_end(self):
        """
        Ends the capture begun on the current stream and instantiates the graph; a capture in which a
            torch op could not be recorded (a launch failed) is discarded and raises StateError naming the
            op. A refused op (a host read) raised when it was issued and leaves the capture valid.
        """
    def debug_dump(self, debug_path):
        """
        Writes the graph to ``debug_path`` (torch_npu's NPUGraph.debug_dump): with a ``.json`` path,
            a Chrome-trace JSON document (torch_npu's format: ``g.json()``) and beside it the aligned view
            ``<path without .json>.aligned.json`` (``npugraph/_npugraph_utils.py``); any other path gets
            Graphviz DOT (``g.dot()``). Returns None. A graph without a finished capture writes nothing (as
            torch_npu's, which leaves an existing file as it was), and a failure of the aligned view is
            logged, leaving the dump itself in place.
        """
    def dot(self) -> str:
        """
        The graph as Graphviz DOT text (what debug_dump writes for a path not ending in .json).
        """
    def groups(self) -> list:
        """
        The graph's task groups in capture order: handles (index, num_tasks, valid) equal to the ones graph_task_group_end returned; [] before the capture ends.
        """
    def instantiate(self) -> None:
        """
        Checks that the graph holds a finished capture: npugraph instantiates at capture_end (torch.cuda.CUDAGraph.instantiate with keep_graph=True).
        """
    def json(self) -> str:
        """
        The graph as a Chrome-trace JSON document, torch_npu's debug_dump format (Note [Graph dump as JSON] in src/graph/graph_def.cpp).
        """
    def pool(self) -> _PoolHandle:
        """
        The graph's memory pool handle: pass it as pool= to a later capture to share its memory.
        """
    def register_generator_state(self, generator):
        """
        torch.cuda.CUDAGraph.register_generator_state: the graph's random ops draw from `generator`
            when they replay, in host order (Note [Random numbers in a graph]); nothing else is needed, so
            this checks the argument and returns.
        """
    def render(self, path = 'graph.svg'):
        """
        Writes the graph drawn by Graphviz to ``path`` (the format from its suffix: .svg, .png,
            .pdf; default graph.svg) and returns the path. Raises UnsupportedError when Graphviz's ``dot``
            is not installed (``g.debug_dump(path)`` still writes the DOT text).
        """
    def replay(self, stream = None, blocking = None):
        """
        Replays the graph on `stream` (default: the current one); blocking=True waits for it,
            blocking=False returns once it is launched, None: the process default (torch_npu's shim: False).
            A graph whose tasks draw random numbers replays after the drawing work issued before it, on any
            stream (Note [Random numbers in a graph] in npugraph/_rng.py).
        """
    def reset(self):
        """
        Deletes the graph and releases its pool: its pinned host blocks return to the default pool
            (Note [Pinned host memory] in npugraph/_pinned.py).
        """
    def update(self, cpu_update_input: typing.Any) -> None:
        """
        Re-issues the fused_infer_attention_score calls recorded by an auto_dispatch_capture capture with new keyword arguments: one dict per call, or one dict for all ([{}] re-issues the current ones). Each replay needs an update before it. Raises StateError if another thread is updating the graph (nothing is changed then).
        """
    @property
    def auto_dispatch_capture(self) -> bool:
        ...
    @property
    def graph_dispatch_mode(self):
        """
        torch_npu master's ``g.graph_dispatch_mode``: its ``update_stream`` is the same stream for
            every graph (``g1.graph_dispatch_mode.update_stream == g2.graph_dispatch_mode.update_stream``).
        """
    @property
    def id(self) -> int:
        ...
    @property
    def keep_graph(self) -> bool:
        ...
    @property
    def num_dispatch_records(self) -> int:
        ...
    @property
    def num_tasks(self) -> int:
        ...
    @property
    def update_stream(self) -> Stream:
        """
        The stream g.update() issues on: one for every graph of the device (Note [One update stream]).
        """
class Stream:
    """
    An asynchronous in-order queue of work (torch.npu.Stream).
    """
    def __eq__(self, arg0: typing.Any) -> bool:
        ...
    def __hash__(self) -> int:
        ...
    def __init__(self, device: typing.Any = None, priority: typing.Any = 0) -> None:
        ...
    def __repr__(self) -> str:
        ...
    def _capture_mark(self) -> int:
        """
        While capturing, a value that changes whenever something is recorded on the stream (0 otherwise): the torch-op recorder extends its last task while it is unchanged.
        """
    def is_capturing(self) -> bool:
        """
        True while the stream records into a graph.
        """
    def is_updating(self) -> bool:
        """
        True between graph_task_update_begin and graph_task_update_end on this stream.
        """
    def query(self) -> bool:
        """
        True when all work issued so far has run (never blocks).
        """
    def record_event(self, event: typing.Any = None) -> Event:
        """
        Records `event` (a new Event when None) on this stream; returns it.
        """
    def synchronize(self) -> None:
        """
        Waits until all work issued so far has run. Raises the first error a task raised since the last synchronize (TaskError naming the task), WaitTimeoutError when the stream (or one it waits on) is stalled in an ExternalEvent wait past its deadline, StateError inside a capture that forbids synchronizing.
        """
    def wait_event(self, event: typing.Any) -> None:
        """
        Orders later work on this stream after the event's most recent record.
        """
    def wait_stream(self, stream: typing.Any) -> None:
        """
        Orders later work on this stream after all work issued so far on `stream`.
        """
    @property
    def device(self) -> str:
        ...
    @property
    def id(self) -> int:
        ...
class _GraphCapture:
    """
    The C++ capture scope behind npugraph.npu.graph (use that instead).
    """
    def __enter__(self) -> None:
        ...
    def __exit__(self, arg0: typing.Any, arg1: typing.Any, arg2: typing.Any) -> bool:
        ...
    def __init__(self, npu_graph: typing.Any, pool: typing.Any = None, stream: typing.Any = None, capture_error_mode: typing.Any = 'global', auto_dispatch_capture: typing.Any = False) -> None:
        ...
class _PoolHandle:
    """
    A memory pool graphs captured one after another can share.
    """
    __hash__: typing.ClassVar[None] = None
    def __eq__(self, arg0: typing.Any) -> bool:
        ...
    def __init__(self) -> None:
        """
        A new private pool (graph_pool_handle()).
        """
    @property
    def id(self) -> int:
        ...
class _TaskGroupHandle:
    """
    Names one task group of a captured graph.
    """
    def __eq__(self, arg0: typing.Any) -> bool:
        ...
    def __hash__(self) -> int:
        ...
    def __repr__(self) -> str:
        ...
    @property
    def graph_id(self) -> int:
        ...
    @property
    def index(self) -> int:
        """
        The group's number in its graph, from 0 in capture order.
        """
    @property
    def num_tasks(self) -> int:
        ...
    @property
    def valid(self) -> bool:
        ...
class _UsePool:
    """
    `with npugraph.npu.use_mem_pool(pool):` (npugraph/_npu_api.py)
    """
    def __init__(self, pool: _PoolHandle) -> None:
        ...
class stream:
    """
    `with npugraph.npu.stream(s):` makes s the current stream.
    """
    def __enter__(self) -> Stream | None:
        ...
    def __exit__(self, *args) -> bool:
        ...
    def __init__(self, stream: typing.Any) -> None:
        ...
def _graph_update_stream() -> Stream:
    """
    The one update stream every auto-dispatch graph's update() issues on (Note [One update stream] in npugraph/recorded_updates.hpp; torch_npu's graph_dispatch_mode.update_stream).
    """
def _set_replay_blocking_default(blocking: bool) -> None:
    """
    Whether NPUGraph.replay() waits when blocking is not given (npugraph.compat.install() sets False: asynchronous, as on the device; Note [Blocking replays from Python]).
    """
def current_device() -> int:
    """
    The current device's index: always 0 (the cpu).
    """
def current_stream(device: typing.Any = None) -> Stream:
    """
    The calling thread's current stream (the default stream unless set_stream or a `with npugraph.npu.stream(s):` block chose another).
    """
def default_external_wait_deadline() -> float:
    """
    The default ExternalEvent wait deadline, in seconds.
    """
def default_stream(device: typing.Any = None) -> Stream:
    """
    The device's default stream (which never captures).
    """
def device_count() -> int:
    """
    The number of devices: 1 (the cpu).
    """
def graph_pool_handle() -> _PoolHandle:
    """
    A new pool handle: pass it as pool= to captures that should share memory.
    """
def graph_task_group_begin(stream: typing.Any) -> None:
    """
    Opens a task group on the capturing stream: its kernel launches are updatable.
    """
def graph_task_group_end(stream: typing.Any) -> _TaskGroupHandle:
    """
    Closes the stream's task group and returns its handle.
    """
def graph_task_update_abort(stream: typing.Any) -> None:
    """
    Leaves update mode on the stream installing nothing (after an exception between graph_task_update_begin and graph_task_update_end); the groups are free to update again.
    """
def graph_task_update_begin(stream: typing.Any, handle: typing.Any, *, order: typing.Any = 'stream') -> None:
    """
    Begins updating the group(s) named by handle (one or a list) on a stream that is not capturing; re-issue the same ops on it, then call graph_task_update_end (or graph_task_update_abort).
    """
def graph_task_update_end(stream: typing.Any) -> None:
    """
    Installs the re-issued launches' parameters (all groups or none).
    """
def is_available() -> bool:
    """
    True: the cpu backend is always available.
    """
def launch_host_func(stream: typing.Any, fn: typing.Any, args: typing.Any = None) -> None:
    """
    Enqueues fn(args) on `stream` (torch_npu.npu.launch_host_func): it runs on the stream's worker once the work issued before it has run, holding the GIL; inside a capture it becomes a graph task that every replay calls. An exception in fn is raised as TaskError by the next synchronizing call on the stream.
    """
def set_default_external_wait_deadline(seconds: typing.Any) -> None:
    """
    The wait deadline (seconds) of every ExternalEvent without its own; initially 10 s. Values above MAX_EXTERNAL_WAIT_DEADLINE (1e8 s) mean that.
    """
def set_device(device: typing.Any) -> None:
    """
    Selects the device: npugraph has one, 0 / 'cpu' / 'npu' / 'npu:0'; any other value raises ArgumentError naming it.
    """
def set_stream(stream: typing.Any) -> None:
    """
    Makes `stream` the calling thread's current stream.
    """
def synchronize(device: typing.Any = None) -> None:
    """
    Waits for every stream of the device; raises the first task error, or WaitTimeoutError naming a stalled ExternalEvent wait and its stream.
    """
def total_collapsed_records() -> int:
    """
    Collapsed records of every ExternalEvent so far (a record that found its event already set; each event counts its own in collapsed_records()).
    """
MAX_EXTERNAL_WAIT_DEADLINE: float = 100000000.0
