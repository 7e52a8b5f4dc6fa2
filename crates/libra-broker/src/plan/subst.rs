//! `$name`, `${name}` and `$$` in task words and substituted files.

use std::collections::BTreeMap;

/// The values a job's words are substituted from.
pub type Vars = BTreeMap<String, String>;

/// Replaces `$name` and `${name}` by their values and `$$` by `$`. On an unknown name returns
/// `Err((byte offset, name))` so the caller can point at it.
pub fn substitute(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, (usize, String)> {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            let ch_len = text[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[i..i + ch_len]);
            i += ch_len;
            continue;
        }
        if i + 1 < b.len() && b[i + 1] == b'$' {
            out.push('$');
            i += 2;
            continue;
        }
        let (name, next) = if i + 1 < b.len() && b[i + 1] == b'{' {
            match text[i + 2..].find('}') {
                Some(end) => (&text[i + 2..i + 2 + end], i + 3 + end),
                None => return Err((i, text[i + 2..].to_string())),
            }
        } else {
            let mut j = i + 1;
            while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                j += 1;
            }
            (&text[i + 1..j], j)
        };
        if name.is_empty() {
            // A lone '$' is kept as it is (e.g. a shell's "$@" inside shexec).
            out.push('$');
            i += 1;
            continue;
        }
        match lookup(name) {
            Some(v) => out.push_str(&v),
            None => return Err((i, name.to_string())),
        }
        i = next;
    }
    Ok(out)
}
