//! TLS for `httpGet` probes with `scheme: HTTPS`, as the kubelet does it:
//! the server's certificate is used for the handshake but neither its chain
//! nor its name is checked (pods serve self-signed certificates, and the
//! kubelet probes by IP). Handshake signatures are still verified against
//! the presented certificate, so the connection is real TLS.

use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};

/// Accepts any certificate; checks what the handshake signs with it.
#[derive(Debug)]
struct SkipCertificateChecks(Arc<CryptoProvider>);

impl ServerCertVerifier for SkipCertificateChecks {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// One client configuration for every probe: building it is the costly
/// part, a connection from it is cheap.
fn config() -> Result<Arc<ClientConfig>> {
    static CONFIG: OnceLock<std::result::Result<Arc<ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map(|b| {
                    Arc::new(
                        b.dangerous()
                            .with_custom_certificate_verifier(Arc::new(SkipCertificateChecks(
                                provider,
                            )))
                            .with_no_client_auth(),
                    )
                })
                .map_err(|e| e.to_string())
        })
        .clone()
        .map_err(anyhow::Error::msg)
        .context("TLS client configuration")
}

/// A client session towards `ip` (no SNI: probes address an IP).
pub fn client(ip: IpAddr) -> Result<ClientConnection> {
    ClientConnection::new(config()?, ServerName::IpAddress(ip.into())).context("starting TLS")
}
