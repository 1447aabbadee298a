// MappedFile (src/core/mapped_file.h): a mapped file truncated under the process makes the next
// read of a lost page a one-line fatal error naming the file and exit status 1, not a death by
// SIGBUS; a SIGBUS that is not a mapped file's fault keeps its default action.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/mapped_file.h"

namespace kimi {
namespace {

// A 12 KiB file of 'w' in the temp directory, named after this process and `name`.
std::string make_file(const std::string& name) {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("kimi-mapped-file-test-" + std::to_string(::getpid()) + "-" + name))
            .string();
    std::ofstream(path, std::ios::binary) << std::string(3 << 12, 'w');
    return path;
}

// Maps a file, truncates it, removes it (a death test's child leaves nothing behind) and reads a
// byte of a page the file lost: the SIGBUS handler exits before this returns.
int read_after_truncation(FileMemory mode) {
    const std::string path = make_file("truncated");
    MappedFile f(path, mode);
    if (f.data()[5000] != 'w') return 2;
    std::filesystem::resize_file(path, 0);
    std::filesystem::remove(path);
    volatile unsigned char c = f.data()[9000];
    return c;
}

TEST(MappedFileSigbus, TruncatedMappedFileIsAFatalLine) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    for (FileMemory mode : {FileMemory::kMap, FileMemory::kMapLazy})
        EXPECT_EXIT(std::_Exit(read_after_truncation(mode)), ::testing::ExitedWithCode(1),
                    "^kimi-cpp: fatal: [^\n]*/kimi-mapped-file-test-[0-9]+-truncated changed on disk while mapped "
                    "\\(--mmap\\): [^\n]*\n$")
            << file_memory_name(mode);
}

TEST(MappedFileSigbus, OtherSigbusKeepsItsDefault) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    auto raise_with_handler = [] {
        const std::string path = make_file("raise");
        const MappedFile f(path, FileMemory::kMap);   // installs the handler
        std::filesystem::remove(path);
        ::raise(SIGBUS);
    };
    EXPECT_EXIT(raise_with_handler(), ::testing::KilledBySignal(SIGBUS), "");
}

TEST(MappedFileSigbus, HugeCopyIsUntouched) {
    const std::string path = make_file("copy");
    const MappedFile f(path, FileMemory::kHugeCopy);
    std::filesystem::resize_file(path, 0);
    std::filesystem::remove(path);
    EXPECT_EQ(f.data()[9000], 'w');   // a private copy: nothing lost
}

}   // namespace
}   // namespace kimi
