/* The release binary targets glibc 2.17 (manylinux2014), which has no copy_file_range (2.27).
 * Rust's std looks the function up weakly and falls back when it is missing, but zig's linker
 * refuses the unresolved reference; this definition makes the system call itself, and kernels
 * without it answer ENOSYS, on which std falls back to read/write. */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

ssize_t copy_file_range(int fd_in, off_t *off_in, int fd_out, off_t *off_out, size_t len, unsigned int flags) {
    return syscall(SYS_copy_file_range, fd_in, off_in, fd_out, off_out, len, flags);
}
