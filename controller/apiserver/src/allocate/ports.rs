//! `--service-node-port-range`: the node ports Services may get, and where
//! the static block ends (KEP-3668). Pure.

use std::fmt;

use super::static_block;

pub const FLAG: &str = "--service-node-port-range";

/// kube-apiserver's default.
pub const DEFAULT: &str = "30000-32767";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    base: u16,
    /// How many ports, `base` included (at least one).
    size: u32,
}

impl PortRange {
    /// `30000-32767`, `30000+2767` (base and extra ports) or one port, as
    /// kube-apiserver reads the flag.
    pub fn parse(value: &str) -> Result<PortRange, String> {
        let text = value.trim();
        let port = |s: &str| {
            s.trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{FLAG}: {s:?} is not a port (1-65535)"))
        };
        let (base, last) = if let Some((a, b)) = text.split_once('-') {
            (port(a)?, port(b)?)
        } else if let Some((a, n)) = text.split_once('+') {
            let base = port(a)?;
            let extra: u16 = n
                .trim()
                .parse()
                .map_err(|_| format!("{FLAG}: {n:?} is not a number of ports"))?;
            let last = base
                .checked_add(extra)
                .ok_or_else(|| format!("{FLAG}: {value:?} goes past port 65535"))?;
            (base, last)
        } else {
            let p = port(text)?;
            (p, p)
        };
        if last < base {
            return Err(format!(
                "{FLAG}: {value:?} ends before it starts (write it low-high, as 30000-32767)"
            ));
        }
        Ok(PortRange {
            base,
            size: u32::from(last - base) + 1,
        })
    }

    pub fn size(&self) -> u128 {
        u128::from(self.size)
    }

    /// The first ports, kept for ports users ask for (KEP-3668:
    /// min(max(16, size / 32), 128), none for 16 ports or fewer).
    pub fn static_size(&self) -> u128 {
        static_block(self.size(), 16, 128, 32)
    }

    pub fn offset(&self, port: u16) -> Option<u128> {
        let off = u32::from(port.checked_sub(self.base)?);
        (off < self.size).then_some(u128::from(off))
    }

    /// The port at `offset` (below `size()`).
    pub fn at(&self, offset: u128) -> u16 {
        u16::try_from(u128::from(self.base) + offset).unwrap_or(u16::MAX)
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let last = u32::from(self.base) + self.size - 1;
        write!(f, "{}-{last}", self.base)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_range_and_its_static_block() {
        let r = PortRange::parse(DEFAULT).expect("default");
        assert_eq!(r.size(), 2768);
        assert_eq!(r.static_size(), 86); // 2768 / 32
        assert_eq!(r.at(0), 30000);
        assert_eq!(r.offset(32767), Some(2767));
        assert_eq!(r.offset(32768), None);
        assert_eq!(r.offset(29999), None);
        assert_eq!(r.to_string(), "30000-32767");
        assert_eq!(
            PortRange::parse("30000-30015").expect("16").static_size(),
            0
        );
        assert_eq!(PortRange::parse("1-65535").expect("all").static_size(), 128);
    }

    #[test]
    fn other_spellings_and_faults_naming_the_flag() {
        assert_eq!(
            PortRange::parse("30000+9").expect("plus").to_string(),
            "30000-30009"
        );
        assert_eq!(PortRange::parse("30500").expect("one").size(), 1);
        for bad in ["32767-30000", "30000-70000", "x", "0-10", "65000+1000", ""] {
            let e = PortRange::parse(bad).expect_err(bad);
            assert!(e.starts_with(FLAG), "{bad}: {e}");
        }
    }
}
