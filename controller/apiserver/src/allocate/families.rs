//! A Service's IP families and cluster IPs: `ipFamilyPolicy` and
//! `ipFamilies` defaulted as kube-apiserver does (from the old object on
//! an update, SingleStack otherwise, RequireDualStack for a headless
//! Service without selector), `clusterIP` and `clusterIPs` kept in step,
//! which addresses a create or an update needs (ExternalName in or out,
//! dual-stack upgrade or downgrade), and `clusterIP` immutable. Pure.

use std::net::IpAddr;

use serde_json::json;

use super::range::Family;
use super::{Config, FieldError, Need, Pool, Refusal, ServiceView, Slot};

const SINGLE: &str = "SingleStack";
const PREFER: &str = "PreferDualStack";
const REQUIRE: &str = "RequireDualStack";

/// `clusterIP` and `clusterIPs` in step: a client that sets only the
/// singular field (an old one) gets the plural; on an update, a client
/// that left the plural out or cleared the singular is understood.
pub fn normalize(new: &mut ServiceView, old: Option<&ServiceView>) {
    let Some(old) = old else {
        if !new.cluster_ip.is_empty() && new.cluster_ips.is_empty() {
            new.cluster_ips = vec![new.cluster_ip.clone()];
        }
        return;
    };
    if !old.cluster_ips.is_empty() && new.cluster_ips.is_empty() && old.cluster_ip == new.cluster_ip
    {
        new.cluster_ips = old.cluster_ips.clone();
    }
    if old.cluster_ip != new.cluster_ip && old.cluster_ips == new.cluster_ips {
        new.cluster_ips = if new.cluster_ip.is_empty() {
            Vec::new()
        } else {
            vec![new.cluster_ip.clone()]
        };
    }
}

fn headless_without_selector(s: &ServiceView) -> bool {
    s.cluster_ip == "None" && !s.has_selector
}

/// On an update between two PreferDualStack Services of one type with
/// the same addresses and families, nothing is done about families (a
/// cluster that changed its dual-stackness does not move them).
fn unchanged_prefer_dual_stack(new: &ServiceView, old: Option<&ServiceView>) -> bool {
    let Some(old) = old else { return false };
    old.kind == new.kind
        && !new.is_external_name()
        && new.policy.as_deref() == Some(PREFER)
        && old.policy.as_deref().is_none_or(|p| p == PREFER)
        && old.cluster_ips == new.cluster_ips
        && old.families == new.families
}

fn policy_error(new: &ServiceView, message: &str) -> FieldError {
    FieldError::invalid("spec.ipFamilyPolicy", json!(new.policy), message)
}

/// Each address sent is an address, of the family its index says, and
/// `clusterIP` is `clusterIPs[0]`.
fn check_addresses(new: &ServiceView) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !new.cluster_ip.is_empty()
        && new
            .cluster_ips
            .first()
            .is_some_and(|f| *f != new.cluster_ip)
    {
        errs.push(FieldError::invalid(
            "spec.clusterIPs[0]",
            json!(new.cluster_ips[0]),
            "must match `clusterIP` when set",
        ));
    }
    let mut seen = Vec::new();
    for (i, ip) in new.cluster_ips.iter().enumerate() {
        let field = format!("spec.clusterIPs[{i}]");
        if ip == "None" {
            if i > 0 || new.cluster_ips.len() > 1 {
                errs.push(FieldError::invalid(
                    field,
                    json!(ip),
                    "must not have more than one value when `None` is specified",
                ));
            }
            continue;
        }
        if ip.is_empty() {
            continue;
        }
        let Ok(addr) = ip.parse::<IpAddr>() else {
            errs.push(FieldError::invalid(
                field,
                json!(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ));
            continue;
        };
        let fam = Family::of(&addr);
        if let Some(want) = new.families.get(i).and_then(|f| Family::parse(f)) {
            if want != fam {
                errs.push(FieldError::invalid(
                    field.clone(),
                    json!(ip),
                    format!(
                        "expected an {} value as indicated by `ipFamilies[{i}]`",
                        want.as_str()
                    ),
                ));
            }
        }
        if seen.contains(&fam) {
            errs.push(FieldError::invalid(
                field,
                json!(ip),
                "may not be the same IP family as another cluster IP",
            ));
        }
        seen.push(fam);
    }
    for (i, f) in new.families.iter().enumerate() {
        if Family::parse(f).is_none() {
            errs.push(FieldError::invalid(
                format!("spec.ipFamilies[{i}]"),
                json!(f),
                "must be IPv4 or IPv6",
            ));
        }
    }
    if let Some(p) = &new.policy {
        if ![SINGLE, PREFER, REQUIRE].contains(&p.as_str()) {
            errs.push(policy_error(
                new,
                "must be SingleStack, PreferDualStack or RequireDualStack",
            ));
        }
    }
    errs
}

/// `ipFamilyPolicy` and `ipFamilies` as kube-apiserver sets them before it
/// allocates.
pub fn init(cfg: &Config, new: &mut ServiceView, old: Option<&ServiceView>) -> Result<(), Refusal> {
    if new.is_external_name() || unchanged_prefer_dual_stack(new, old) {
        return Ok(());
    }
    if new.policy.is_none() {
        new.policy = Some(match old.and_then(|o| o.policy.clone()) {
            Some(p) => p,
            None if headless_without_selector(new) => REQUIRE.into(),
            None => SINGLE.into(),
        });
    }
    let errs = check_addresses(new);
    if !errs.is_empty() {
        return Err(Refusal::Invalid(errs));
    }
    let single = new.policy.as_deref() == Some(SINGLE);
    let mut errs = Vec::new();
    if let Some(old) = old {
        if single {
            // Setting SingleStack with the fields as they were drops the
            // secondary address and family.
            if old.cluster_ips == new.cluster_ips && new.cluster_ips.len() > 1 {
                new.cluster_ips.truncate(1);
            }
            if old.families == new.families && new.families.len() > 1 {
                new.families.truncate(1);
            }
        } else {
            if !new.cluster_ips.is_empty() && new.cluster_ips.len() < old.cluster_ips.len() {
                errs.push(policy_error(
                    new,
                    "must be 'SingleStack' to release the secondary cluster IP",
                ));
            }
            if !new.families.is_empty() && new.families.len() < old.families.len() {
                errs.push(policy_error(
                    new,
                    "must be 'SingleStack' to release the secondary IP family",
                ));
            }
        }
    }
    if single && new.cluster_ips.len() == 2 {
        errs.push(policy_error(
            new,
            "must be 'RequireDualStack' or 'PreferDualStack' when multiple cluster IPs are specified",
        ));
    }
    if single && new.families.len() == 2 {
        errs.push(policy_error(
            new,
            "must be 'RequireDualStack' or 'PreferDualStack' when multiple IP families are specified",
        ));
    }
    // Families follow the addresses sent.
    for i in 0..new.cluster_ips.len() {
        let Ok(addr) = new.cluster_ips[i].parse::<IpAddr>() else {
            break; // `None`, or nothing asked for.
        };
        let fam = Family::of(&addr);
        if i >= new.families.len() {
            if cfg.range(fam).is_some() {
                new.families.push(fam.as_str().into());
            } else {
                errs.push(FieldError::invalid(
                    format!("spec.clusterIPs[{i}]"),
                    json!(new.cluster_ips[i]),
                    format!("{} is not configured on this cluster", fam.as_str()),
                ));
            }
        }
    }
    if !errs.is_empty() {
        return Err(Refusal::Invalid(errs));
    }
    if headless_without_selector(new) {
        if new.families.is_empty() {
            new.families.push(cfg.primary().as_str().into());
        }
        if new.families.len() < 2 && !single {
            let other = Family::parse(&new.families[0])
                .unwrap_or(cfg.primary())
                .other();
            new.families.push(other.as_str().into());
        }
        return Ok(());
    }
    if new.policy.as_deref() == Some(REQUIRE) && !cfg.dual_stack() {
        errs.push(policy_error(
            new,
            "this cluster is not configured for dual-stack services",
        ));
    }
    for (i, f) in new.families.iter().enumerate() {
        if Family::parse(f).and_then(|f| cfg.range(f)).is_none() {
            errs.push(FieldError::invalid(
                format!("spec.ipFamilies[{i}]"),
                json!(f),
                "not configured on this cluster",
            ));
        }
    }
    if !errs.is_empty() {
        return Err(Refusal::Invalid(errs));
    }
    if new.families.is_empty() {
        new.families.push(cfg.primary().as_str().into());
    }
    if !single && new.families.len() == 1 && cfg.dual_stack() {
        let other = Family::parse(&new.families[0])
            .unwrap_or(cfg.primary())
            .other();
        new.families.push(other.as_str().into());
    }
    Ok(())
}

/// A slot for each family from `from` on, marked empty where no address
/// was sent; the empty ones to choose.
fn needs_from(new: &mut ServiceView, from: usize) -> Vec<Need> {
    let mut needs = Vec::new();
    for i in from..new.families.len() {
        if i >= new.cluster_ips.len() {
            new.cluster_ips.push(String::new());
        }
        if new.cluster_ips[i].is_empty() {
            if let Some(f) = Family::parse(&new.families[i]) {
                needs.push(Need {
                    slot: Slot::ClusterIp(i),
                    pool: Pool::Ip(f),
                });
            }
        }
    }
    needs
}

/// The addresses a new Service needs chosen (none for ExternalName or
/// headless Services).
pub fn needs_on_create(new: &mut ServiceView) -> Vec<Need> {
    if new.is_external_name() || new.is_headless() {
        return Vec::new();
    }
    needs_from(new, 0)
}

/// The addresses an update needs chosen, after `clusterIP` was checked
/// immutable; releases follow from what the old object held.
pub fn needs_on_update(new: &mut ServiceView, old: &ServiceView) -> Result<Vec<Need>, Refusal> {
    if new.is_external_name() || unchanged_prefer_dual_stack(new, Some(old)) {
        return Ok(Vec::new());
    }
    if old.is_external_name() {
        // From ExternalName: addresses as for a new Service.
        return Ok(needs_on_create(new));
    }
    if old.is_headless() {
        return Ok(Vec::new());
    }
    let mut errs = Vec::new();
    for (i, (was, now)) in old.cluster_ips.iter().zip(&new.cluster_ips).enumerate() {
        if was == now {
            continue;
        }
        if i == 0 && old.cluster_ip != new.cluster_ip {
            errs.push(FieldError::invalid(
                "spec.clusterIP",
                json!(new.cluster_ip),
                "field is immutable",
            ));
        } else {
            errs.push(FieldError::invalid(
                format!("spec.clusterIPs[{i}]"),
                json!(now),
                "may not change once set",
            ));
        }
    }
    if old.cluster_ip != new.cluster_ip && errs.is_empty() {
        errs.push(FieldError::invalid(
            "spec.clusterIP",
            json!(new.cluster_ip),
            "field is immutable",
        ));
    }
    if !errs.is_empty() {
        return Err(Refusal::Invalid(errs));
    }
    if old.families.len() == 1 && new.families.len() == 2 {
        // Upgraded to dual-stack: the secondary address.
        return Ok(needs_from(new, 1));
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn cfg(ranges: &str) -> Config {
        Config::from_flags(ranges, "30000-32767").expect("cfg")
    }

    fn view(spec: Value) -> ServiceView {
        ServiceView::read(&json!({"metadata": {"name": "web"}, "spec": spec}))
    }

    #[test]
    fn a_new_service_is_single_stack_in_the_primary_family() {
        let c = cfg("fd00:198:18::/112,198.18.0.0/16");
        let mut s = view(json!({"selector": {"a": "b"}}));
        init(&c, &mut s, None).expect("init");
        assert_eq!(s.policy.as_deref(), Some(SINGLE));
        assert_eq!(s.families, vec!["IPv6"]);
        let needs = needs_on_create(&mut s);
        assert_eq!(
            needs,
            vec![Need {
                slot: Slot::ClusterIp(0),
                pool: Pool::Ip(Family::V6)
            }]
        );
    }

    #[test]
    fn dual_stack_policies() {
        let dual = cfg("198.18.0.0/16,fd00:198:18::/112");
        let single = cfg("198.18.0.0/16");
        let mut prefer = view(json!({"ipFamilyPolicy": PREFER}));
        init(&dual, &mut prefer, None).expect("dual");
        assert_eq!(prefer.families, vec!["IPv4", "IPv6"]);
        assert_eq!(needs_on_create(&mut prefer).len(), 2);
        let mut prefer = view(json!({"ipFamilyPolicy": PREFER}));
        init(&single, &mut prefer, None).expect("single");
        assert_eq!(prefer.families, vec!["IPv4"]);
        let mut require = view(json!({"ipFamilyPolicy": REQUIRE}));
        let Err(Refusal::Invalid(e)) = init(&single, &mut require, None) else {
            panic!("RequireDualStack on a single-stack cluster");
        };
        assert_eq!(e[0].field, "spec.ipFamilyPolicy");
        let mut v6 = view(json!({"ipFamilies": ["IPv6"]}));
        let Err(Refusal::Invalid(e)) = init(&single, &mut v6, None) else {
            panic!("IPv6 not configured");
        };
        assert_eq!(
            e[0].text(),
            "spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"
        );
        // Families follow the addresses asked for.
        let mut asked = view(json!({"clusterIP": "fd00:198:18::9", "ipFamilyPolicy": PREFER}));
        normalize(&mut asked, None);
        init(&dual, &mut asked, None).expect("asked");
        assert_eq!(asked.families, vec!["IPv6", "IPv4"]);
        assert_eq!(needs_on_create(&mut asked).len(), 1);
        assert_eq!(asked.cluster_ips, vec!["fd00:198:18::9", ""]);
    }

    #[test]
    fn headless_services_get_no_address() {
        let c = cfg("198.18.0.0/16");
        let mut h = view(json!({"clusterIP": "None"}));
        normalize(&mut h, None);
        init(&c, &mut h, None).expect("headless");
        assert_eq!(h.policy.as_deref(), Some(REQUIRE));
        assert_eq!(h.families, vec!["IPv4", "IPv6"]);
        assert!(needs_on_create(&mut h).is_empty());
    }

    #[test]
    fn the_cluster_ip_is_immutable_but_may_be_left_out() {
        let c = cfg("198.18.0.0/16");
        let mut old = view(json!({"clusterIP": "198.18.0.9"}));
        normalize(&mut old, None);
        init(&c, &mut old, None).expect("old");
        let mut changed = view(json!({"clusterIP": "198.18.0.10"}));
        normalize(&mut changed, Some(&old));
        init(&c, &mut changed, Some(&old)).expect("init");
        let Err(Refusal::Invalid(e)) = needs_on_update(&mut changed, &old) else {
            panic!("changed");
        };
        assert_eq!(
            e[0].text(),
            "spec.clusterIP: Invalid value: \"198.18.0.10\": field is immutable"
        );
        let mut same = old.clone();
        assert!(needs_on_update(&mut same, &old).expect("same").is_empty());
    }

    #[test]
    fn upgrading_to_dual_stack_needs_the_secondary_address_only() {
        let c = cfg("198.18.0.0/16,fd00:198:18::/112");
        let mut old = view(json!({"clusterIP": "198.18.0.9"}));
        normalize(&mut old, None);
        init(&c, &mut old, None).expect("old");
        let mut up = old.clone();
        up.policy = Some(REQUIRE.into());
        normalize(&mut up, Some(&old));
        init(&c, &mut up, Some(&old)).expect("up");
        let needs = needs_on_update(&mut up, &old).expect("needs");
        assert_eq!(
            needs,
            vec![Need {
                slot: Slot::ClusterIp(1),
                pool: Pool::Ip(Family::V6)
            }]
        );
        // And back: SingleStack with the fields as they were drops it.
        let mut dual = up.clone();
        dual.cluster_ips[1] = "fd00:198:18::5".into();
        let mut down = dual.clone();
        down.policy = Some(SINGLE.into());
        init(&c, &mut down, Some(&dual)).expect("down");
        assert_eq!(down.cluster_ips, vec!["198.18.0.9"]);
        assert_eq!(down.families, vec!["IPv4"]);
        // Fewer addresses without SingleStack is refused.
        let mut fewer = dual.clone();
        fewer.cluster_ips.truncate(1);
        assert!(init(&c, &mut fewer, Some(&dual)).is_err());
    }

    #[test]
    fn addresses_that_are_no_addresses_are_refused() {
        let c = cfg("198.18.0.0/16");
        for (spec, field) in [
            (json!({"clusterIP": "198.18.0.300"}), "spec.clusterIPs[0]"),
            (
                json!({"clusterIPs": ["198.18.0.1"], "ipFamilies": ["IPv6"]}),
                "spec.clusterIPs[0]",
            ),
            (
                json!({"clusterIP": "198.18.0.1", "clusterIPs": ["198.18.0.2"]}),
                "spec.clusterIPs[0]",
            ),
            (
                json!({"ipFamilyPolicy": "Sometimes"}),
                "spec.ipFamilyPolicy",
            ),
        ] {
            let mut s = view(spec.clone());
            normalize(&mut s, None);
            let Err(Refusal::Invalid(e)) = init(&c, &mut s, None) else {
                panic!("{spec}");
            };
            assert_eq!(e[0].field, field, "{spec}");
        }
    }
}
