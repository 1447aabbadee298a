// MappedFile implementation over POSIX mmap.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace kimi {

MappedFile::MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st{};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw Error(path + ": not a regular file");
    }
    size_ = size_t(st.st_size);
    if (size_ > 0) {
        // why: MAP_POPULATE faults every page in now (the load), not during the first steps —
        // a cold prefill otherwise spends most of its time in page faults on the weights.
        addr_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        if (addr_ == MAP_FAILED) {
            addr_ = nullptr;
            ::close(fd);
            throw Error(path + ": mmap failed: " + std::strerror(errno));
        }
    }
    ::close(fd);
}

MappedFile::~MappedFile() {
    if (addr_) ::munmap(addr_, size_);
}

}  // namespace kimi
