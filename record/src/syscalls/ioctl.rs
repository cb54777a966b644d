//! What an ioctl(2) request writes at its argument.
//!
//! Most request numbers encode their direction and argument size
//! (include/uapi/asm-generic/ioctl.h: size in bits 16..30, direction in bits
//! 30..32, `_IOC_READ` meaning the kernel writes to user memory). The old
//! tty and socket requests predate that encoding and are all `_IO`-shaped:
//! the ones programs commonly make are listed with the size of what they
//! write (tty_ioctl(4), ioctl_tty(2), netdevice(7)).

/// `_IOC_WRITE`: the kernel reads the argument.
const IOC_WRITE: u32 = 1;
/// `_IOC_READ`: the kernel writes the argument.
const IOC_READ: u32 = 2;

/// Legacy requests that write their argument, with its size in bytes.
const LEGACY_READS: &[(u32, u64)] = &[
    (0x5401, 36), // TCGETS: the kernel's struct termios (19 control chars), not glibc's
    (0x5405, 18), // TCGETA: struct termio
    (0x540F, 4),  // TIOCGPGRP: pid_t
    (0x5411, 4),  // TIOCOUTQ (SIOCOUTQ): int
    (0x5413, 8),  // TIOCGWINSZ: struct winsize
    (0x5415, 4),  // TIOCMGET: int
    (0x5419, 4),  // TIOCGSOFTCAR: int
    (0x541B, 4),  // FIONREAD (TIOCINQ, SIOCINQ): int
    (0x5424, 4),  // TIOCGETD: int
    (0x5429, 4),  // TIOCGSID: pid_t
    (0x5456, 36), // TIOCGLCKTRMIOS: struct termios
    (0x8905, 4),  // SIOCATMARK: int
    (0x8906, 16), // SIOCGSTAMP_OLD: struct timeval
    (0x8910, 40), // SIOCGIFNAME: struct ifreq
    (0x8913, 40), // SIOCGIFFLAGS
    (0x8915, 40), // SIOCGIFADDR
    (0x8917, 40), // SIOCGIFDSTADDR
    (0x8919, 40), // SIOCGIFBRDADDR
    (0x891B, 40), // SIOCGIFNETMASK
    (0x891D, 40), // SIOCGIFMETRIC
    (0x8921, 40), // SIOCGIFMTU
    (0x8927, 40), // SIOCGIFHWADDR
    (0x8933, 40), // SIOCGIFINDEX
    (0x8942, 40), // SIOCGIFTXQLEN
];

/// Legacy requests that write nothing to user memory.
const LEGACY_NO_WRITE: &[u32] = &[
    0x5402, 0x5403, 0x5404, // TCSETS, TCSETSW, TCSETSF
    0x5406, 0x5407, 0x5408, // TCSETA, TCSETAW, TCSETAF
    0x5409, 0x540A, 0x540B, // TCSBRK, TCXONC, TCFLSH
    0x540C, 0x540D, 0x540E, // TIOCEXCL, TIOCNXCL, TIOCSCTTY
    0x5410, 0x5412, 0x5414, // TIOCSPGRP, TIOCSTI, TIOCSWINSZ
    0x5416, 0x5417, 0x5418, // TIOCMBIS, TIOCMBIC, TIOCMSET
    0x541A, 0x541D, 0x5421, // TIOCSSOFTCAR, TIOCCONS, FIONBIO
    0x5422, 0x5423, 0x5425, // TIOCNOTTY, TIOCSETD, TCSBRKP
    0x5450, 0x5451, 0x5452, // FIONCLEX, FIOCLEX, FIOASYNC
];

/// Type bytes of the legacy `_IO`-shaped families: 'T' (tty, FIO*) and
/// 0x89 (sockets). An unlisted request of theirs may write anything.
const LEGACY_TYPES: [u32; 2] = [0x54, 0x89];

/// FS_IOC_FIEMAP (`_IOWR('f', 11, struct fiemap)`, linux/fiemap.h): the
/// encoded size is only `struct fiemap`'s 32-byte header; the kernel also
/// fills the extent array that follows it.
const FS_IOC_FIEMAP: u32 = 0xC020_660B;
/// The size of one `struct fiemap_extent` (bytes).
const FIEMAP_EXTENT: u64 = 56;

/// The bytes ioctl request `request` wrote past its encoded size at
/// `arg`, read after the call with `rd`: FS_IOC_FIEMAP's extents, as many
/// as its header's `fm_mapped_extents` (the u32 at byte 20) says it
/// filled (dpkg sorts files by their first extent, and a replay that gave
/// back only the header sorted them otherwise).
pub fn written_beyond(request: u64, arg: u64, rd: &mut dyn FnMut(u64) -> Option<u64>) -> u64 {
    if request as u32 != FS_IOC_FIEMAP {
        return 0;
    }
    let mapped = rd(arg + 16).unwrap_or(0) >> 32;
    mapped.min(1 << 16) * FIEMAP_EXTENT
}

/// How many bytes ioctl request `request` writes at its argument: `Some(0)`
/// when it writes none, `None` when weft cannot tell (an unlisted legacy
/// request), so that the call must be logged as unsupported.
pub fn written(request: u64) -> Option<u64> {
    let req = request as u32;
    if let Some(&(_, len)) = LEGACY_READS.iter().find(|&&(r, _)| r == req) {
        return Some(len);
    }
    if LEGACY_NO_WRITE.contains(&req) {
        return Some(0);
    }
    let dir = req >> 30;
    let size = u64::from((req >> 16) & 0x3fff);
    match dir {
        _ if dir & IOC_READ != 0 => Some(size),
        IOC_WRITE => Some(0),
        _ if LEGACY_TYPES.contains(&((req >> 8) & 0xff)) => None,
        // `_IO` requests of other families carry no data.
        _ => Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_and_legacy_requests() {
        // TIOCGPTN = _IOR('T', 0x30, unsigned int).
        assert_eq!(written(0x8004_5430), Some(4));
        // TIOCSPTLCK = _IOW('T', 0x31, int): read by the kernel only.
        assert_eq!(written(0x4004_5431), Some(0));
        assert_eq!(written(0x5401), Some(36));
        assert_eq!(written(libc::TIOCGWINSZ), Some(8));
        assert_eq!(written(libc::FIONREAD), Some(4));
        assert_eq!(written(libc::FIONBIO), Some(0));
        // TIOCGICOUNT (0x545D) is legacy and unlisted.
        assert_eq!(written(0x545D), None);
    }
}
