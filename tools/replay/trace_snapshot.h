/*
 * tools/replay/trace_snapshot.h (internal to the trace reader): read a
 * PyTorch memory snapshot pickle's device_traces into a trace.
 *
 * Thread-safe: no; one builder per read.
 */
#ifndef GMR_TOOLS_REPLAY_TRACE_SNAPSHOT_H_
#define GMR_TOOLS_REPLAY_TRACE_SNAPSHOT_H_

#include <stddef.h>

#include "gmr/status.h"
#include "tools/replay/trace.h"
#include "tools/replay/trace_build.h"

/**
 * Parse the pickle in `data` (`size` bytes, borrowed) and apply the entries
 * of one device's trace (options->snapshot_device, or the only device with
 * entries) to `b`. Sets b->trace->format and snapshot_device.
 * Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (a malformed or truncated pickle,
 * an opcode outside the subset, not a snapshot, no or several devices, a
 * malformed entry without skip_malformed, no allocation) or
 * GMR_ERR_OUT_OF_MEMORY, with "PATH: ..." in err.
 */
gmr_status trace_snapshot_read(trace_builder *b, const unsigned char *data, size_t size,
                               const char *path, const replay_trace_options *options, char *err,
                               size_t err_bytes);

#endif /* GMR_TOOLS_REPLAY_TRACE_SNAPSHOT_H_ */
