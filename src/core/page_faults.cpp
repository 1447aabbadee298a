// process_page_faults (alloc_counter.h): getrusage's minor + major faults of the process.
#include <sys/resource.h>

#include "core/alloc_counter.h"

namespace kimi {

uint64_t process_page_faults() {
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return uint64_t(u.ru_minflt) + uint64_t(u.ru_majflt);
}

}   // namespace kimi
