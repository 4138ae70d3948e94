//! The cluster's certificate authority and the API server's serving
//! certificate, as `init` makes them (ECDSA P-256, as kubeadm's defaults
//! allow; the CA for 10 years, the server certificate for 1, kubeadm's
//! lifetimes).

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

const CA_DAYS: i64 = 3650;
const SERVER_DAYS: i64 = 365;

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("{what}: {source}")]
    Rcgen {
        what: &'static str,
        source: rcgen::Error,
    },
    #[error("subject alternative name {0:?} is neither an IP address nor a DNS name")]
    BadName(String),
}

/// PEM text of a CA and a server certificate it signed.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: String,
    pub ca_key: String,
    pub server_cert: String,
    pub server_key: String,
}

fn rc(what: &'static str) -> impl Fn(rcgen::Error) -> PkiError {
    move |source| PkiError::Rcgen { what, source }
}

fn validity(p: &mut CertificateParams, days: i64) {
    let now = rcgen::date_time_ymd(1970, 1, 1)
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
    // A little slack for clocks a few minutes behind.
    p.not_before = now - std::time::Duration::from_secs(300);
    p.not_after = now + std::time::Duration::from_secs(days as u64 * 86_400);
}

/// A new CA and a serving certificate for `names` (IP addresses and DNS
/// names; `localhost`, 127.0.0.1 and ::1 are always included so local
/// clients can verify the server).
pub fn generate(cluster: &str, names: &[String]) -> Result<Pki, PkiError> {
    let ca_key = KeyPair::generate().map_err(rc("generating the CA key"))?;
    let mut ca = CertificateParams::default();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("{cluster}-ca"));
    ca.distinguished_name = dn;
    validity(&mut ca, CA_DAYS);
    let ca_cert = ca.self_signed(&ca_key).map_err(rc("signing the CA"))?;

    let mut sans: Vec<SanType> = Vec::new();
    let mut all: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    all.extend(names.iter().cloned());
    for n in all {
        let san = match n.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => {
                if !crate::identity::is_dns_subdomain(&n) {
                    return Err(PkiError::BadName(n));
                }
                SanType::DnsName(n.clone().try_into().map_err(rc("a DNS name"))?)
            }
        };
        if !sans.contains(&san) {
            sans.push(san);
        }
    }
    let server_key = KeyPair::generate().map_err(rc("generating the server key"))?;
    let mut sp = CertificateParams::default();
    sp.subject_alt_names = sans;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "sluice-apiserver");
    sp.distinguished_name = dn;
    sp.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut sp, SERVER_DAYS);
    let server_cert = sp
        .signed_by(&server_key, &ca_cert, &ca_key)
        .map_err(rc("signing the server certificate"))?;
    Ok(Pki {
        ca_cert: ca_cert.pem(),
        ca_key: ca_key.serialize_pem(),
        server_cert: server_cert.pem(),
        server_key: server_key.serialize_pem(),
    })
}
