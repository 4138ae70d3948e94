//! Who a request is: the three identities the API server knows, and the
//! static token file that maps bearer tokens to them (kube-apiserver's
//! `--token-auth-file` format: `token,user,uid,"group1,group2"`).

use std::fmt;

/// Kubernetes' group for cluster administrators.
pub const ADMIN_GROUP: &str = "system:masters";
/// Kubernetes' group for kubelets; NodeRestriction applies to its members.
pub const NODES_GROUP: &str = "system:nodes";
/// User names of nodes: `system:node:<node name>`.
pub const NODE_USER_PREFIX: &str = "system:node:";
/// The L4 load balancer (`sluice-lb`): reads its objects, writes nothing.
pub const LOAD_BALANCER_USER: &str = "system:sluice:load-balancer";
/// Its group in the token file (it needs none; the user name decides).
pub const LOAD_BALANCER_GROUP: &str = "system:sluice:load-balancers";

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Identity {
    /// May do everything.
    Admin { user: String },
    /// May read what its node needs and write only its own Node, Lease and
    /// its pods' status (NodeRestriction).
    Node { name: String },
    /// `system:sluice:load-balancer`: may get, list and watch the L4
    /// load-balancer objects (`sluice.dev` l4loadbalancers, healthchecks,
    /// networkendpointgroups, instancegroups) and nothing else.
    LoadBalancer,
}

impl Identity {
    pub fn user(&self) -> String {
        match self {
            Identity::Admin { user } => user.clone(),
            Identity::Node { name } => format!("{NODE_USER_PREFIX}{name}"),
            Identity::LoadBalancer => LOAD_BALANCER_USER.to_string(),
        }
    }

    pub fn groups(&self) -> &'static str {
        match self {
            Identity::Admin { .. } => ADMIN_GROUP,
            Identity::Node { .. } => NODES_GROUP,
            Identity::LoadBalancer => LOAD_BALANCER_GROUP,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenFileError {
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
}

/// One line of the token file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenEntry {
    pub token: String,
    pub identity: Identity,
}

/// Render the token file.
pub fn render(entries: &[TokenEntry]) -> String {
    let mut out = String::new();
    for e in entries {
        let user = e.identity.user();
        out.push_str(&format!(
            "{},{},{},\"{}\"\n",
            e.token,
            user,
            user,
            e.identity.groups()
        ));
    }
    out
}

/// Parse the token file; every line must name a user the server knows
/// (`system:node:<name>` in `system:nodes`, any user in `system:masters`,
/// or `system:sluice:load-balancer`), and no token may appear twice. A
/// file without the load balancer's line (written by an older `init`)
/// still parses.
pub fn parse(text: &str) -> Result<Vec<TokenEntry>, TokenFileError> {
    let mut out: Vec<TokenEntry> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |m: &str| TokenFileError::Line {
            line,
            message: m.to_string(),
        };
        let l = raw.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let mut fields = l.splitn(4, ',');
        let token = fields.next().unwrap_or("").trim();
        let user = fields.next().unwrap_or("").trim();
        let _uid = fields
            .next()
            .ok_or_else(|| err("expected token,user,uid[,\"groups\"]"))?;
        let groups = fields.next().unwrap_or("").trim().trim_matches('"');
        if token.len() < 16 {
            return Err(err("token shorter than 16 characters"));
        }
        if out.iter().any(|e| e.token == token) {
            return Err(err("token listed twice"));
        }
        let in_group = |g: &str| groups.split(',').any(|x| x.trim() == g);
        let identity = if in_group(ADMIN_GROUP) {
            Identity::Admin { user: user.into() }
        } else if in_group(NODES_GROUP) {
            let name = user
                .strip_prefix(NODE_USER_PREFIX)
                .filter(|n| is_dns_subdomain(n))
                .ok_or_else(|| {
                    err(&format!(
                        "a member of {NODES_GROUP} must be {NODE_USER_PREFIX}<node name>, not {user:?}"
                    ))
                })?;
            Identity::Node { name: name.into() }
        } else if user == LOAD_BALANCER_USER {
            Identity::LoadBalancer
        } else {
            return Err(err(&format!(
                "groups {groups:?} give no access: expected {ADMIN_GROUP} or {NODES_GROUP} \
                 (or the user {LOAD_BALANCER_USER})"
            )));
        };
        out.push(TokenEntry {
            token: token.into(),
            identity,
        });
    }
    Ok(out)
}

/// A Kubernetes object name that is a DNS-1123 subdomain (what Node names
/// must be): at most 253 characters, lowercase alphanumerics, `-` and `.`,
/// starting and ending alphanumeric.
pub fn is_dns_subdomain(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 253
        && s.chars().all(|c| alnum(c) || c == '-' || c == '.')
        && s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.split('.')
            .all(|label| !label.is_empty() && label.starts_with(alnum) && label.ends_with(alnum))
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.user())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips() {
        let entries = vec![
            TokenEntry {
                token: "a".repeat(32),
                identity: Identity::Admin {
                    user: "admin".into(),
                },
            },
            TokenEntry {
                token: "b".repeat(32),
                identity: Identity::Node {
                    name: "node-1".into(),
                },
            },
            TokenEntry {
                token: "c".repeat(32),
                identity: Identity::LoadBalancer,
            },
        ];
        let text = render(&entries);
        assert!(text.contains("system:node:node-1"), "{text}");
        assert!(text.contains("system:sluice:load-balancer,"), "{text}");
        // An older file, without the load balancer, still parses.
        let older: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse(&older), Ok(entries[..2].to_vec()));
        assert_eq!(parse(&text), Ok(entries));
    }

    #[test]
    fn bad_lines_are_refused_naming_the_line() {
        let t = "a".repeat(32);
        for (text, want) in [
            (
                "short,admin,admin,\"system:masters\"".to_string(),
                "line 1: token shorter",
            ),
            (format!("# c\n{t},x,x,\"viewers\""), "line 2: groups"),
            (
                format!("{t},bob,bob,\"system:nodes\""),
                "system:node:<node name>",
            ),
            (
                format!("{t},system:node:Bad_Name,u,\"system:nodes\""),
                "system:node:<node name>",
            ),
            (
                format!("{t},a,a,\"system:masters\"\n{t},b,b,\"system:masters\""),
                "line 2: token listed twice",
            ),
            (t.to_string(), "line 1: expected token,user,uid"),
        ] {
            let e = parse(&text).expect_err(want).to_string();
            assert!(e.contains(want), "{e} / want {want}");
        }
    }

    #[test]
    fn node_names_are_dns_subdomains() {
        for ok in ["node-1", "a", "n1.zone-b.example"] {
            assert!(is_dns_subdomain(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a..b", "a_b", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad}");
        }
    }
}
