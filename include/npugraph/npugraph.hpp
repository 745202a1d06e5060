// Umbrella header: the whole public API.
#pragma once

#include "npugraph/device.hpp"
#include "npugraph/dtype.hpp"
#include "npugraph/error.hpp"
#include "npugraph/event.hpp"
#include "npugraph/external_event.hpp"
#include "npugraph/graph.hpp"
#include "npugraph/kernel.hpp"
#include "npugraph/memory.hpp"
#include "npugraph/ops/elementwise.hpp"
#include "npugraph/ops/fia.hpp"
#include "npugraph/shape.hpp"
#include "npugraph/stream.hpp"
#include "npugraph/task_group.hpp"
#include "npugraph/tasks.hpp"
#include "npugraph/tensor.hpp"
