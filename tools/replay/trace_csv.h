/*
 * tools/replay/trace_csv.h (internal to the trace reader): read the text
 * formats (PyTorch snapshot CSV, RMM log; see trace.h) line by line.
 *
 * Thread-safe: no; one builder per read.
 */
#ifndef GMR_TOOLS_REPLAY_TRACE_CSV_H_
#define GMR_TOOLS_REPLAY_TRACE_CSV_H_

#include <stddef.h>

#include "gmr/status.h"
#include "tools/replay/line_reader.h"
#include "tools/replay/trace.h"
#include "tools/replay/trace_build.h"

/**
 * Read the header line (which sets b->trace->format) and every row after it
 * from `reader` into `b`. Returns GMR_OK; GMR_ERR_INVALID_ARGUMENT (unknown
 * header, a malformed line without skip_malformed, a read error, no
 * allocation) or GMR_ERR_OUT_OF_MEMORY, with "PATH:LINE: reason" in err.
 */
gmr_status trace_csv_read(trace_builder *b, replay_line_reader *reader, const char *path,
                          const replay_trace_options *options, char *err, size_t err_bytes);

#endif /* GMR_TOOLS_REPLAY_TRACE_CSV_H_ */
