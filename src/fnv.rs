//! FNV-1a: a tiny stable hash, for exported-name suffixes and the demos' seeds. A leaf
//! module, so that neither `catalog` nor `demo` has to depend on the other for it.

/// FNV-1a 64: stable across runs, platforms and versions (unlike `DefaultHasher`).
pub(crate) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
