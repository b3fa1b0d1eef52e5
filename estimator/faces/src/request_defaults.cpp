// request_defaults(): the values resolve_request leaves when no flag or
// DeepSpeed config gives them (see request_defaults.h).
#include "zeromem/request_defaults.h"

#include "zeromem/types.h"

namespace zeromem {

RequestDefaults request_defaults() {
    const TrainingSettings t{};
    RequestDefaults d;
    d.micro_batch = t.micro_batch;
    d.grad_accum = t.grad_accum;
    d.seq_len = t.seq_len;
    return d;  // host_memory unset: resolve_request reads no host capacity without --host-memory
}

}  // namespace zeromem
