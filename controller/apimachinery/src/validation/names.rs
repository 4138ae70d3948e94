//! The string rules every kind shares (apimachinery's `util/validation`):
//! DNS labels and subdomains, qualified names, label values, port names,
//! environment variable names, percentages. Each answers the messages
//! upstream gives, empty when the value is good; the callers turn each
//! message into one `Invalid` error, as upstream does.

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const ENV_VAR_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";
const PERCENT_FMT: &str = "[0-9]+%";
const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const ENV_VAR_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const CONFIG_KEY_MSG: &str =
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const PERCENT_MSG: &str =
    "a valid percent string must be a numeric string followed by an ending '%'";

pub const DNS1123_LABEL_MAX: usize = 63;
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
const QUALIFIED_NAME_MAX: usize = 63;
const LABEL_VALUE_MAX: usize = 63;

/// `<msg> (e.g. 'a',  or 'b', regex used for validation is '<re>')`: the
/// doubled space is upstream's.
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{re}')");
    }
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{re}')"));
    s
}

pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn max_bytes_error(n: usize) -> String {
    format!("must be no more than {n} bytes")
}

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

fn alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
fn is_label(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            lower_alnum(f) && lower_alnum(l) && b.iter().all(|&c| lower_alnum(c) || c == b'-')
        }
        _ => false,
    }
}

fn is_subdomain(s: &str) -> bool {
    s.split('.').all(is_label)
}

pub fn dns1123_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !is_label(v) {
        if is_subdomain(v) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

pub fn dns1123_subdomain(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !is_subdomain(v) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

pub fn dns1035_label(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    let ok = v.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_label(v);
    if !ok {
        errs.push(regex_error(
            DNS1035_LABEL_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn is_qualified_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&f), Some(&l)) => {
            alnum(f)
                && alnum(l)
                && b.iter()
                    .all(|&c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn qualified_regex() -> String {
    regex_error(
        QUALIFIED_NAME_MSG,
        QUALIFIED_NAME_FMT,
        &["MyName", "my.name", "123-abc"],
    )
}

/// A label key, annotation key, finalizer or condition type:
/// `[prefix/]name`.
pub fn qualified_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = v.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                qualified_regex()
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > QUALIFIED_NAME_MAX {
        errs.push(format!("name part {}", max_bytes_error(QUALIFIED_NAME_MAX)));
    }
    if !is_qualified_part(name) {
        errs.push(format!("name part {}", qualified_regex()));
    }
    errs
}

pub fn label_value(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > LABEL_VALUE_MAX {
        errs.push(max_bytes_error(LABEL_VALUE_MAX));
    }
    if !v.is_empty() && !is_qualified_part(v) {
        errs.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// IANA service names: container and service port names, probe ports.
pub fn port_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > 15 {
        errs.push("must be no more than 15 characters".into());
    }
    let b = v.as_bytes();
    if !b.iter().all(|&c| lower_alnum(c) || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if v.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if v.starts_with('-') || v.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

pub fn port_number(p: i64) -> Vec<String> {
    if (1..=65535).contains(&p) {
        Vec::new()
    } else {
        vec![inclusive_range(1, 65535)]
    }
}

pub fn inclusive_range(lo: i64, hi: i64) -> String {
    format!("must be between {lo} and {hi}, inclusive")
}

pub const NEGATIVE: &str = "must be greater than or equal to 0";
pub const IMMUTABLE: &str = "field is immutable";

pub fn env_var_name(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let b = v.as_bytes();
    let ok = b
        .first()
        .is_some_and(|&c| c.is_ascii_alphabetic() || matches!(c, b'-' | b'.' | b'_'))
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_'));
    if !ok {
        errs.push(regex_error(
            ENV_VAR_MSG,
            ENV_VAR_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        ));
    }
    errs.extend(dots(v));
    errs
}

/// `IsConfigMapKey`: a ConfigMap's or Secret's key (and a key a pod
/// refers to), which becomes a file name in a volume. The empty key fails
/// the pattern, as upstream's `+` demands a character.
pub fn config_key(k: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if k.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    let ok = !k.is_empty()
        && k.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
    if !ok {
        errs.push(regex_error(
            CONFIG_KEY_MSG,
            CONFIG_KEY_FMT,
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    errs.extend(dots(k));
    errs
}

/// `.` and `..` are no names of files or keys.
fn dots(v: &str) -> Vec<String> {
    if v == "." {
        vec!["must not be '.'".into()]
    } else if v == ".." {
        vec!["must not be '..'".into()]
    } else if v.starts_with("..") {
        vec!["must not start with '..'".into()]
    } else {
        Vec::new()
    }
}

/// `[0-9]+%`
pub fn is_percent(v: &str) -> bool {
    v.strip_suffix('%')
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()))
}

pub fn percent_error() -> String {
    regex_error(PERCENT_MSG, PERCENT_FMT, &["1%", "93%"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(dns1123_label(&"a".repeat(63)).is_empty());
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(
            dns1123_label("Bad_Name"),
            ["a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert!(dns1123_subdomain("a.b-c.d").is_empty());
        assert_eq!(dns1123_subdomain("a..b").len(), 1);
        assert_eq!(dns1035_label("1abc").len(), 1);
        assert!(dns1035_label("abc-1").is_empty());
    }

    #[test]
    fn qualified_names() {
        assert!(qualified_name("example.com/My_Name.1").is_empty());
        assert_eq!(
            qualified_name(""),
            [
                "name part must be non-empty".to_string(),
                format!("name part {}", qualified_regex())
            ]
        );
        assert_eq!(
            qualified_name("/simple")[0],
            "prefix part must be non-empty"
        );
        assert_eq!(qualified_name("a/b/c").len(), 1);
        assert!(label_value("").is_empty());
        assert_eq!(label_value("a b").len(), 1);
    }

    #[test]
    fn port_names_and_env_vars() {
        assert!(port_name("http").is_empty());
        assert_eq!(port_name("-a--b-").len(), 2);
        assert_eq!(port_name("123"), ["must contain at least one letter (a-z)"]);
        assert!(env_var_name("MY_ENV.NAME").is_empty());
        assert_eq!(env_var_name("ev!1").len(), 1);
        assert_eq!(env_var_name(".."), ["must not be '..'"]);
        assert!(is_percent("25%") && !is_percent("%") && !is_percent("2.5%"));
    }
}
