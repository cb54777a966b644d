//! The CPU a trace was recorded on. weft does not trap cpuid: that needs
//! CPUID faulting (arch_prctl(ARCH_SET_CPUID), Intel and recent AMD parts,
//! often not in VMs), so a program that chooses its code by cpuid (glibc's
//! string functions, a compressor's SIMD paths) may take other paths on
//! another CPU and diverge. The trace keeps the CPU's identity so that a
//! replay on another CPU says so.

use serde::{Deserialize, Serialize};
use std::arch::x86_64::__cpuid_count;

/// A CPU's identity and features, from cpuid.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Cpu {
    /// The brand string (leaves 0x80000002-0x80000004), trimmed.
    pub model: String,
    /// Leaf 1 eax (family, model, stepping), leaf 1 ecx and edx, leaf 7
    /// ebx, ecx and edx (feature bits). Leaf 1 ebx, which holds the APIC
    /// id of the core that answered, is left out.
    pub signature: [u32; 6],
}

impl Cpu {
    /// The CPU this process runs on.
    pub fn current() -> Self {
        // SAFETY: cpuid exists on every x86-64 CPU; leaves above the
        // maximum return zeros or the highest leaf's values, never fault.
        // (Newer Rust declares it safe; the block is for older ones.)
        #[allow(unused_unsafe)]
        let leaf = |eax: u32, ecx: u32| unsafe { __cpuid_count(eax, ecx) };
        let max_extended = leaf(0x8000_0000, 0).eax;
        let mut brand = Vec::with_capacity(48);
        if max_extended >= 0x8000_0004 {
            for l in 0x8000_0002..=0x8000_0004 {
                let r = leaf(l, 0);
                for word in [r.eax, r.ebx, r.ecx, r.edx] {
                    brand.extend_from_slice(&word.to_le_bytes());
                }
            }
        }
        let model = String::from_utf8_lossy(&brand).trim_matches(|c: char| c == '\0' || c.is_whitespace()).to_string();
        let one = leaf(1, 0);
        let seven = match leaf(0, 0).eax >= 7 {
            true => leaf(7, 0),
            false => std::arch::x86_64::CpuidResult { eax: 0, ebx: 0, ecx: 0, edx: 0 },
        };
        Self { model, signature: [one.eax, one.ecx, one.edx, seven.ebx, seven.ecx, seven.edx] }
    }
}

impl std::fmt::Display for Cpu {
    /// The brand string and the signature words in hex.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<String> = self.signature.iter().map(|w| format!("{w:08x}")).collect();
        write!(f, "{} [{}]", self.model, words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_cpu_is_stable() {
        let a = Cpu::current();
        assert_eq!(a, Cpu::current(), "cpuid answers the same on every call");
        assert_ne!(a.signature[0], 0, "family/model/stepping");
    }
}
