//! A link's L3 configuration (addresses, main-table routes) captured from
//! `ip -j` and replayed onto a link of the same name: how the emulated
//! engine hands the node's addresses to its TAP and gives them back.

use std::net::IpAddr;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;

use super::Netns;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrEntry {
    pub addr: IpAddr,
    pub prefix: u8,
    pub broadcast: Option<String>,
}

/// A main-table route out of the link, as `ip route` arguments after the
/// destination-less verb (everything but `dev`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    pub v6: bool,
    pub dst: String,
    pub gateway: Option<String>,
    /// `ip route` options other than dst/gateway/dev (proto, scope, src,
    /// metric, onlink).
    pub opts: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkSnapshot {
    pub name: String,
    pub mac: String,
    pub mtu: u32,
    pub up: bool,
    pub addrs: Vec<AddrEntry>,
    pub routes: Vec<RouteEntry>,
    /// `net.ipv6.conf.<link>.disable_ipv6` before the engine touched it.
    pub disable_ipv6: Option<String>,
}

impl LinkSnapshot {
    /// Read `name`'s configuration in `ns`.
    pub fn capture(ns: &Netns, name: &str) -> Result<Self> {
        let link = ns
            .ip_json(&["link", "show", "dev", name])
            .with_context(|| format!("reading link {name}"))?;
        let addr = ns
            .ip_json(&["addr", "show", "dev", name])
            .with_context(|| format!("reading addresses of {name}"))?;
        let r4 = ns
            .ip_json(&["-4", "route", "show", "table", "main", "dev", name])
            .with_context(|| format!("reading IPv4 routes of {name}"))?;
        let r6 = ns
            .ip_json(&["-6", "route", "show", "table", "main", "dev", name])
            .with_context(|| format!("reading IPv6 routes of {name}"))?;
        let mut s = Self::from_json(name, &link, &addr, &r4, &r6)?;
        let n = name.to_string();
        s.disable_ipv6 = ns
            .run(move || super::sysctl::get(&["net", "ipv6", "conf", &n, "disable_ipv6"]).ok())
            .ok()
            .flatten();
        Ok(s)
    }

    /// Pure part of [`Self::capture`].
    pub fn from_json(
        name: &str,
        link: &Value,
        addr: &Value,
        routes4: &Value,
        routes6: &Value,
    ) -> Result<Self> {
        let l = link.get(0).ok_or_else(|| anyhow!("no link named {name}"))?;
        let mac = l
            .get("address")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("link {name} has no MAC address"))?
            .to_string();
        let mtu = l
            .get("mtu")
            .and_then(Value::as_u64)
            .ok_or_else(|| anyhow!("link {name} has no MTU"))? as u32;
        let up = l
            .get("flags")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(|x| x.as_str() == Some("UP")));
        let mut addrs = Vec::new();
        let infos = addr
            .get(0)
            .and_then(|a| a.get("addr_info"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        for i in infos {
            let fam = i.get("family").and_then(Value::as_str).unwrap_or("");
            if fam != "inet" && fam != "inet6" {
                continue;
            }
            let Some(local) = i.get("local").and_then(Value::as_str) else {
                continue;
            };
            let Ok(ip) = local.parse::<IpAddr>() else {
                continue;
            };
            // The kernel makes link-local addresses itself.
            if let IpAddr::V6(v6) = ip {
                if v6.segments()[0] & 0xffc0 == 0xfe80 {
                    continue;
                }
            }
            let prefix = i
                .get("prefixlen")
                .and_then(Value::as_u64)
                .unwrap_or(if ip.is_ipv4() { 32 } else { 128 }) as u8;
            let broadcast = i
                .get("broadcast")
                .and_then(Value::as_str)
                .map(str::to_string);
            addrs.push(AddrEntry {
                addr: ip,
                prefix,
                broadcast,
            });
        }
        let mut routes = Vec::new();
        for (v6, list) in [(false, routes4), (true, routes6)] {
            for r in list.as_array().cloned().unwrap_or_default() {
                if let Some(e) = route_entry(v6, &r) {
                    routes.push(e);
                }
            }
        }
        Ok(LinkSnapshot {
            name: name.to_string(),
            mac,
            mtu,
            up,
            addrs,
            routes,
            disable_ipv6: None,
        })
    }

    /// The `ip` commands that put the addresses and routes on link `dev`:
    /// addresses first, then routes without a gateway, then the rest.
    pub fn restore_plan(&self, dev: &str) -> Vec<Vec<String>> {
        let mut plan = Vec::new();
        for a in &self.addrs {
            let mut c: Vec<String> = vec![
                "addr".into(),
                "replace".into(),
                format!("{}/{}", a.addr, a.prefix),
            ];
            if a.broadcast.is_some() && a.addr.is_ipv4() {
                c.push("broadcast".into());
                c.push("+".into());
            }
            c.push("dev".into());
            c.push(dev.into());
            if a.addr.is_ipv6() {
                c.push("nodad".into());
            }
            plan.push(c);
        }
        let mut routes: Vec<&RouteEntry> = self.routes.iter().collect();
        routes.sort_by_key(|r| r.gateway.is_some());
        for r in routes {
            let mut c: Vec<String> = Vec::new();
            if r.v6 {
                c.push("-6".into());
            }
            c.extend(["route".into(), "replace".into(), r.dst.clone()]);
            if let Some(g) = &r.gateway {
                c.extend(["via".into(), g.clone()]);
            }
            c.extend(["dev".into(), dev.into()]);
            c.extend(r.opts.iter().cloned());
            plan.push(c);
        }
        plan
    }

    /// Carry out [`Self::restore_plan`] in `ns`. Every step is tried; the
    /// first error is returned after all of them ran.
    pub fn restore(&self, ns: &Netns, dev: &str) -> Result<()> {
        let mut first: Option<anyhow::Error> = None;
        for cmd in self.restore_plan(dev) {
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            if let Err(e) = ns.ip(&args) {
                tracing::warn!(error = %format!("{e:#}"), "restoring link configuration");
                first.get_or_insert(e);
            }
        }
        match first {
            Some(e) => Err(e.context(format!("restoring the configuration of {dev}"))),
            None => Ok(()),
        }
    }
}

fn route_entry(v6: bool, r: &Value) -> Option<RouteEntry> {
    let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
    // Routes the kernel derives from addresses come back with them.
    if s("protocol").as_deref() == Some("kernel") {
        return None;
    }
    if let Some(t) = s("type") {
        if t != "unicast" {
            return None;
        }
    }
    let dst = s("dst")?;
    let mut opts = Vec::new();
    if let Some(p) = s("protocol") {
        opts.extend(["proto".to_string(), p]);
    }
    if let Some(sc) = s("scope") {
        opts.extend(["scope".to_string(), sc]);
    }
    if let Some(src) = s("prefsrc") {
        opts.extend(["src".to_string(), src]);
    }
    if let Some(m) = r.get("metric").and_then(Value::as_u64) {
        opts.extend(["metric".to_string(), m.to_string()]);
    }
    let flags = r.get("flags").and_then(Value::as_array);
    if flags.is_some_and(|f| f.iter().any(|x| x.as_str() == Some("onlink"))) {
        opts.push("onlink".into());
    }
    Some(RouteEntry {
        v6,
        dst,
        gateway: s("gateway"),
        opts,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> LinkSnapshot {
        let link = json!([{"ifindex":2,"ifname":"nic0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],
            "mtu":1500,"address":"02:00:c6:12:00:02","operstate":"UP"}]);
        let addr = json!([{"ifname":"nic0","addr_info":[
            {"family":"inet","local":"198.18.0.2","prefixlen":24,"broadcast":"198.18.0.255","scope":"global"},
            {"family":"inet6","local":"fd00:18::2","prefixlen":64,"scope":"global"},
            {"family":"inet6","local":"fe80::ff:fe12:2","prefixlen":64,"scope":"link"}]}]);
        let r4 = json!([
            {"dst":"default","gateway":"198.18.0.1","flags":[]},
            {"dst":"198.18.0.0/24","protocol":"kernel","scope":"link","prefsrc":"198.18.0.2","flags":[]},
            {"dst":"198.19.2.0/24","gateway":"198.18.0.3","protocol":"static","flags":["onlink"]},
            {"type":"blackhole","dst":"198.18.9.0/24","flags":[]}]);
        let r6 = json!([
            {"dst":"fd00:18::/64","protocol":"kernel","metric":256,"flags":[],"pref":"medium"},
            {"dst":"fe80::/64","protocol":"kernel","metric":256,"flags":[],"pref":"medium"},
            {"dst":"fd00:99::/64","metric":1024,"flags":[],"pref":"medium"}]);
        LinkSnapshot::from_json("nic0", &link, &addr, &r4, &r6).unwrap()
    }

    #[test]
    fn captures_addresses_without_link_local_and_routes_without_kernel_ones() {
        let s = sample();
        assert_eq!(s.mac, "02:00:c6:12:00:02");
        assert_eq!(s.mtu, 1500);
        assert!(s.up);
        assert_eq!(s.addrs.len(), 2);
        assert_eq!(s.routes.len(), 3);
    }

    #[test]
    fn plan_puts_addresses_then_direct_routes_then_gatewayed_ones() {
        let plan: Vec<String> = sample()
            .restore_plan("nic0")
            .into_iter()
            .map(|c| c.join(" "))
            .collect();
        assert_eq!(
            plan,
            [
                "addr replace 198.18.0.2/24 broadcast + dev nic0",
                "addr replace fd00:18::2/64 dev nic0 nodad",
                "-6 route replace fd00:99::/64 dev nic0 metric 1024",
                "route replace default via 198.18.0.1 dev nic0",
                "route replace 198.19.2.0/24 via 198.18.0.3 dev nic0 proto static onlink",
            ]
        );
    }

    #[test]
    fn missing_link_is_an_error_naming_it() {
        let e = LinkSnapshot::from_json("nic9", &json!([]), &json!([]), &json!([]), &json!([]))
            .unwrap_err();
        assert!(e.to_string().contains("nic9"));
    }
}
