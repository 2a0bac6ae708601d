//! planmux's own folders under the user's base directories (XDG): `$VAR` when it is set
//! and not empty, else the usual folder in the home directory.

use std::path::PathBuf;

/// `$var`, else `$HOME/under_home`; `None` when neither is set.
pub fn base(var: &str, under_home: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(under_home))
        })
}
