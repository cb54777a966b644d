//! Which file descriptors of a replayed process refer to the recording's
//! standard output or standard error, so that a replay shows what the
//! recorded run printed through any of them: `dup(1)`, `dup2(1, 7)`,
//! `fcntl(1, F_DUPFD, 10)`, and not a descriptor 1 that was closed and
//! reopened onto a file.
//!
//! In a replay these calls are emulated from the log (their results come
//! from it, the real descriptors do not change), so the table follows the
//! logged calls: dup(2), dup2/dup3, fcntl(2) F_DUPFD and F_DUPFD_CLOEXEC
//! copy an entry, close(2) and close_range(2) drop entries, and any call
//! that returns a new descriptor drops the entry its number had. A forked
//! child starts with a clone of its parent's table (fork(2): the child's
//! descriptors are duplicates of the parent's).

use std::collections::BTreeMap;

/// A stream of the recording that a descriptor refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// The recorded program's standard output (descriptor 1 at start).
    Stdout,
    /// Its standard error (descriptor 2 at start).
    Stderr,
}

/// One process's descriptors that refer to a recorded [`Stream`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fds {
    streams: BTreeMap<i32, Stream>,
}

impl Default for Fds {
    /// A program's table at start: 1 is stdout, 2 is stderr.
    fn default() -> Self {
        Self { streams: BTreeMap::from([(1, Stream::Stdout), (2, Stream::Stderr)]) }
    }
}

/// `close_range(2)` flag: mark close-on-exec instead of closing.
const CLOSE_RANGE_CLOEXEC: u64 = 1 << 2;

impl Fds {
    /// The stream descriptor `fd` refers to, if it is one.
    pub fn stream(&self, fd: u64) -> Option<Stream> {
        self.streams.get(&(fd as i32)).copied()
    }

    /// Follows logged syscall `nr` with arguments `args` that returned
    /// `result` (a negative errno on failure).
    pub fn update(&mut self, nr: i64, args: &[u64; 6], result: i64) {
        let fd = |a: u64| a as i32;
        match nr {
            // close(2) frees the descriptor even when it reports EINTR or EIO.
            libc::SYS_close if result != -libc::EBADF as i64 => {
                self.streams.remove(&fd(args[0]));
            }
            libc::SYS_close_range if result == 0 && args[2] & CLOSE_RANGE_CLOEXEC == 0 => {
                let (first, last) = (args[0].min(i32::MAX as u64) as i32, args[1].min(i32::MAX as u64) as i32);
                self.streams.retain(|&k, _| k < first || k > last);
            }
            _ if result < 0 => {}
            libc::SYS_dup => self.copy(fd(args[0]), result as i32),
            libc::SYS_dup2 | libc::SYS_dup3 => self.copy(fd(args[0]), fd(args[1])),
            libc::SYS_fcntl if matches!(args[1] as i32, libc::F_DUPFD | libc::F_DUPFD_CLOEXEC) => {
                self.copy(fd(args[0]), result as i32)
            }
            _ if returns_new_fd(nr) => {
                self.streams.remove(&(result as i32));
            }
            _ => {}
        }
    }

    /// `to` now refers to what `from` refers to.
    fn copy(&mut self, from: i32, to: i32) {
        match self.streams.get(&from).copied() {
            Some(s) => self.streams.insert(to, s),
            None => self.streams.remove(&to),
        };
    }
}

/// Whether syscall `nr` returns a new descriptor on success (section 2 of
/// the manual for each).
fn returns_new_fd(nr: i64) -> bool {
    matches!(
        nr,
        libc::SYS_open
            | libc::SYS_openat
            | libc::SYS_openat2
            | libc::SYS_creat
            | libc::SYS_socket
            | libc::SYS_accept
            | libc::SYS_accept4
            | libc::SYS_eventfd
            | libc::SYS_eventfd2
            | libc::SYS_epoll_create
            | libc::SYS_epoll_create1
            | libc::SYS_memfd_create
            | libc::SYS_inotify_init
            | libc::SYS_inotify_init1
            | libc::SYS_signalfd
            | libc::SYS_signalfd4
            | libc::SYS_timerfd_create
            | libc::SYS_pidfd_open
            | libc::SYS_open_by_handle_at
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(fds: &mut Fds, nr: i64, a: [u64; 3], result: i64) {
        fds.update(nr, &[a[0], a[1], a[2], 0, 0, 0], result);
    }

    #[test]
    fn duplicates_follow_their_original() {
        let mut fds = Fds::default();
        call(&mut fds, libc::SYS_dup, [1, 0, 0], 3);
        call(&mut fds, libc::SYS_dup2, [2, 7, 0], 7);
        call(&mut fds, libc::SYS_fcntl, [1, libc::F_DUPFD_CLOEXEC as u64, 10], 10);
        assert_eq!(fds.stream(3), Some(Stream::Stdout));
        assert_eq!(fds.stream(7), Some(Stream::Stderr));
        assert_eq!(fds.stream(10), Some(Stream::Stdout));
        call(&mut fds, libc::SYS_dup2, [4, 7, 0], -libc::EBADF as i64);
        assert_eq!(fds.stream(7), Some(Stream::Stderr), "a failed dup2 changes nothing");
    }

    #[test]
    fn closed_and_reopened_is_not_a_stream() {
        let mut fds = Fds::default();
        call(&mut fds, libc::SYS_close, [1, 0, 0], 0);
        call(&mut fds, libc::SYS_openat, [libc::AT_FDCWD as u64, 0, 0], 1);
        assert_eq!(fds.stream(1), None);
        call(&mut fds, libc::SYS_dup2, [1, 2, 0], 2);
        assert_eq!(fds.stream(2), None, "dup2 over stderr of a file");
        let mut fds = Fds::default();
        call(&mut fds, libc::SYS_close_range, [2, u32::MAX as u64, 0], 0);
        assert_eq!((fds.stream(1), fds.stream(2)), (Some(Stream::Stdout), None));
        call(&mut fds, libc::SYS_close_range, [0, 5, CLOSE_RANGE_CLOEXEC], 0);
        assert_eq!(fds.stream(1), Some(Stream::Stdout), "CLOEXEC closes nothing now");
    }
}
