//! Bounds on a state file checked before the YAML parser sees it.
//!
//! libyaml (under `serde_yaml`) keeps one pending "simple key" per open
//! flow level and walks them all on every token, so a file nested 100 000
//! deep costs it O(depth²): half a minute for 200 KB. `serde_yaml` only
//! refuses such a file after loading it whole. A linear pre-scan refuses it
//! first, in microseconds per kilobyte.

use std::fmt;

/// The largest state file read at all. A 10 000-Service × 10-endpoint file
/// is about 20 MB; parsing holds several times the file in memory, so this
/// bounds the agent's peak too.
pub const MAX_STATE_BYTES: u64 = 64 * 1024 * 1024;

/// The deepest nesting accepted, counted conservatively (see
/// [`check_nesting`]). Kubernetes objects nest about 12 deep (a Pod's
/// `spec.containers[].readinessProbe.httpGet.httpHeaders[].name`); the count
/// here can reach about twice the real depth for block YAML, and
/// `serde_yaml` itself refuses more than 128.
pub const MAX_NESTING: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitError {
    TooLarge { bytes: u64, max: u64 },
    TooDeep { line: usize, max: usize },
}

impl fmt::Display for LimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitError::TooLarge { bytes, max } => write!(
                f,
                "the file is {bytes} bytes; at most {max} are read (split it or remove objects)"
            ),
            LimitError::TooDeep { line, max } => write!(
                f,
                "line {line}: nested more than {max} levels deep; no Kubernetes object nests this deep"
            ),
        }
    }
}

impl std::error::Error for LimitError {}

pub fn check_size(bytes: u64) -> Result<(), LimitError> {
    if bytes > MAX_STATE_BYTES {
        return Err(LimitError::TooLarge {
            bytes,
            max: MAX_STATE_BYTES,
        });
    }
    Ok(())
}

/// Refuse text whose nesting may exceed `max`, in one pass.
///
/// The count is an upper bound, never an underestimate, so nothing deeper
/// than `max` reaches the parser: per line, the block levels open above it
/// (each deeper indentation, and a `- ` item at its parent key's
/// indentation, opens one), plus every `- `, `? ` and `key: ` that opens a
/// compact node on the line itself, plus the flow brackets (`[`, `{`) open
/// at any point. Quoted scalars, comments and block scalars (`|`, `>`) are
/// skipped, so brackets in a script or a string do not count.
pub fn check_nesting(text: &str, max: usize) -> Result<(), LimitError> {
    let mut scan = Scanner::default();
    for (i, line) in text.lines().enumerate() {
        if let Some(depth) = scan.line(line) {
            if depth > max {
                return Err(LimitError::TooDeep { line: i + 1, max });
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    Double,
    Single,
}

#[derive(Default)]
struct Scanner {
    /// Indentation of each open block level, and whether it is a sequence
    /// item (a `- ` at its parent key's indentation nests one more).
    blocks: Vec<(usize, bool)>,
    /// Open `[` / `{`.
    flow: usize,
    /// Inside a quoted scalar that spans lines.
    quote: Option<Quote>,
    /// Inside a block scalar whose parent sits at this indentation: lines
    /// indented deeper (or blank) are its text.
    block_scalar: Option<usize>,
}

impl Scanner {
    /// The nesting bound reached on this line, `None` for lines that are
    /// text of a scalar, blank or comments only.
    fn line(&mut self, line: &str) -> Option<usize> {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if let Some(parent) = self.block_scalar {
            if rest.trim().is_empty() || indent > parent {
                return None;
            }
            self.block_scalar = None;
        }
        if self.quote.is_none() && self.flow == 0 {
            if rest.starts_with("---") || rest.starts_with("...") {
                // A new document starts from nothing.
                self.blocks.clear();
                return None;
            }
            let trimmed = rest.trim_end();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                return None;
            }
            let dash = rest.starts_with("- ") || trimmed == "-";
            while let Some(&(top, top_dash)) = self.blocks.last() {
                // An item at its key's indentation stays inside that key.
                if top > indent || (top == indent && (top_dash || !dash)) {
                    self.blocks.pop();
                } else {
                    break;
                }
            }
            self.blocks.push((indent, dash));
        }
        let mut depth = self.blocks.len() + self.flow;
        let mut max_depth = depth;
        let bytes = rest.as_bytes();
        let mut i = 0;
        let mut plain_start = true;
        while i < bytes.len() {
            let c = bytes[i];
            match self.quote {
                Some(Quote::Double) => {
                    match c {
                        b'\\' => i += 1,
                        b'"' => self.quote = None,
                        _ => {}
                    }
                    i += 1;
                    continue;
                }
                Some(Quote::Single) => {
                    if c == b'\'' {
                        if bytes.get(i + 1) == Some(&b'\'') {
                            i += 1;
                        } else {
                            self.quote = None;
                        }
                    }
                    i += 1;
                    continue;
                }
                None => {}
            }
            let next_is_space = bytes.get(i + 1).is_none_or(|b| *b == b' ' || *b == b'\t');
            match c {
                b'#' if i == 0 || bytes[i - 1] == b' ' || bytes[i - 1] == b'\t' => break,
                b'"' if plain_start => self.quote = Some(Quote::Double),
                b'\'' if plain_start => self.quote = Some(Quote::Single),
                b'[' | b'{' => {
                    self.flow += 1;
                    depth += 1;
                }
                b']' | b'}' => {
                    self.flow = self.flow.saturating_sub(1);
                    depth = depth.saturating_sub(1);
                }
                // Compact nodes: `- - x`, `? k`, `- a: b` each open a level
                // on this line.
                b'-' | b'?' if plain_start && next_is_space => depth += 1,
                b':' if next_is_space => depth += 1,
                b'|' | b'>' if plain_start && self.flow == 0 && is_block_header(&bytes[i..]) => {
                    self.block_scalar = Some(indent);
                    break;
                }
                _ => {}
            }
            max_depth = max_depth.max(depth);
            // Quotes open a scalar only where a scalar can start.
            plain_start = matches!(c, b' ' | b'\t' | b'[' | b'{' | b',' | b':' | b'-' | b'?');
            i += 1;
        }
        Some(max_depth)
    }
}

/// `|` or `>` with optional chomping / indentation indicators, then nothing
/// but an optional comment.
fn is_block_header(s: &[u8]) -> bool {
    let mut i = 1;
    while i < s.len() && matches!(s[i], b'-' | b'+' | b'1'..=b'9') {
        i += 1;
    }
    let tail = &s[i..];
    let tail = tail
        .iter()
        .position(|b| *b != b' ' && *b != b'\t')
        .map_or(&[][..], |p| &tail[p..]);
    tail.is_empty() || tail[0] == b'#'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_ok(text: &str, max: usize) -> bool {
        check_nesting(text, max).is_ok()
    }

    #[test]
    fn flow_nesting_is_counted_and_located() {
        let deep = format!("a: {}{}\n", "[".repeat(150), "]".repeat(150));
        assert_eq!(
            check_nesting(&deep, MAX_NESTING),
            Err(LimitError::TooDeep {
                line: 1,
                max: MAX_NESTING
            })
        );
        let shallow = format!("a: {}{}\n", "[".repeat(20), "]".repeat(20));
        assert!(depth_ok(&shallow, MAX_NESTING));
    }

    #[test]
    fn compact_sequences_and_indentation_are_counted() {
        assert!(!depth_ok(&format!("{}x\n", "- ".repeat(150)), MAX_NESTING));
        let mut text = String::new();
        for d in 0..150 {
            text.push_str(&format!("{}k{d}:\n", " ".repeat(d)));
        }
        assert!(!depth_ok(&text, MAX_NESTING));
    }

    #[test]
    fn the_bound_is_never_below_the_real_depth() {
        // Real depth 4: a, b, the list, the item's map.
        let text = "a:\n  b:\n  - c: 1\n    d: 2\n";
        assert!(!depth_ok(text, 3));
        assert!(depth_ok(text, 8));
        // A list at its key's indentation is still one level deeper.
        let text = "a:\n- b:\n  - c\n";
        assert!(!depth_ok(text, 3));
    }

    #[test]
    fn brackets_in_strings_comments_and_block_scalars_do_not_count() {
        let brackets = "[".repeat(200);
        let text = format!(
            "a: \"{brackets}\"\nb: '{brackets}'\nc: 1 # {brackets}\nd: |\n  {brackets}\n  more {brackets}\ne: >-\n\n  {brackets}\nf: x\n"
        );
        assert!(depth_ok(&text, 10), "{:?}", check_nesting(&text, 10));
        // A quoted scalar over several lines.
        let text = format!("a: \"one\n  {brackets}\n  two\"\nb: 1\n");
        assert!(depth_ok(&text, 10));
    }

    #[test]
    fn a_kubernetes_pod_passes_with_room_to_spare() {
        let pod = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: c
    command: ["sh", "-c", "while [ 1 ]; do sleep 1; done"]
    readinessProbe:
      httpGet:
        path: /
        httpHeaders:
        - name: X
          value: "y"
status: {podIPs: [{ip: 198.19.1.2}]}
"#;
        assert!(depth_ok(pod, 24), "{:?}", check_nesting(pod, 24));
    }

    #[test]
    fn documents_start_from_nothing() {
        let mut text = String::new();
        for _ in 0..200 {
            text.push_str("---\na:\n  b:\n    c: 1\n");
        }
        assert!(depth_ok(&text, 10));
    }

    #[test]
    fn size_limit_names_both_numbers() {
        let e = check_size(MAX_STATE_BYTES + 1).unwrap_err().to_string();
        assert!(e.contains(&(MAX_STATE_BYTES + 1).to_string()), "{e}");
        assert!(e.contains(&MAX_STATE_BYTES.to_string()), "{e}");
        assert!(check_size(MAX_STATE_BYTES).is_ok());
    }
}
