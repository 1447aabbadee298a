// human_bytes: a byte count as people read it in messages ("512.0 KiB", "3.5 MiB", "1.25 GiB").
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace kimi {

inline std::string human_bytes(int64_t bytes) {
    char buf[32];
    if (bytes < (int64_t(1) << 20))
        std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024.0);
    else if (bytes < (int64_t(1) << 30))
        std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1024.0 * 1024.0));
    else
        std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

}   // namespace kimi
