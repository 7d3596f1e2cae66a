// A map stage from records to examples whose function runs in child
// processes (seed 004's use_multiprocessing): the counterpart over processes
// of Dataset::map with MapOptions().workers(n).max_queue_size(m).
#ifndef ELASTICDL_DATA_PROCESS_MAP_H_
#define ELASTICDL_DATA_PROCESS_MAP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "elasticdl/data/dataset.h"
#include "elasticdl/status.h"

namespace elasticdl {

// The example of the record at `position` (0, 1, ...) of the stream.
// Called in a child process.
using ProcessMapFn = std::function<StatusOr<Example>(Record record, uint64_t position)>;

struct ProcessMapOptions {
  // Child processes; 0 is read as 1.
  size_t processes = 1;
  // Records handed to the children ahead of the consumer, at most (as
  // MapOptions::max_queue_size); 0 is read as 1.
  size_t max_queue_size = 10;
};

// The stage yielding fn(record, position) for each record of `input`, in
// input order, with each example's origins set to its record.
//
// On its first Next() the stage forks options.processes children of the
// calling process. A child keeps only the calling thread (no other thread of
// the parent exists in it), closes every inherited descriptor but its own
// socket and the standard streams, ignores SIGTERM, SIGINT and SIGHUP (it
// ends when its socket closes, or by SIGKILL: a worker asked to stop still
// gets the examples of its last minibatch), runs LibTorch on one thread,
// and applies `fn` to the records it is sent, one at a time, sending the examples back
// (their tensors copied: dense ones only). Record i goes to child
// i % processes. A thread of the parent sends and receives; the consumer
// waits for the next element in order.
//
// Errors: an element whose fn failed (an error status, or a throw) is that
// error, and the stream ends after it, as Dataset::map's; an example that
// cannot be sent back (a sparse or quantized tensor) is INVALID_ARGUMENT; a
// child that dies (a crash in fn) is INTERNAL naming its pid and signal; fork
// failing is RESOURCE_EXHAUSTED. The destructor kills and reaps the children.
//
// Not thread-safe: one consumer, as every stage.
std::shared_ptr<internal::Source<Example>> MakeProcessMapSource(
    std::shared_ptr<internal::Source<Record>> input, ProcessMapFn fn, ProcessMapOptions options);

}  // namespace elasticdl

#endif  // ELASTICDL_DATA_PROCESS_MAP_H_
