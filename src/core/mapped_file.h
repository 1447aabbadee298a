// MappedFile: a read-only memory mapping of a whole file (weights are never copied).
#pragma once
#include <cstddef>
#include <string>

namespace kimi {

class MappedFile {
public:
    explicit MappedFile(const std::string& path);   // throws kimi::Error naming the file
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const unsigned char* data() const { return static_cast<const unsigned char*>(addr_); }
    size_t size() const { return size_; }
    const std::string& path() const { return path_; }

private:
    std::string path_;
    void* addr_ = nullptr;
    size_t size_ = 0;
};

}  // namespace kimi
