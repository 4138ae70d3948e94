//! A kube-rs client over the controller's own router, in process: the
//! loops use the API exactly as any client does, without a socket, TLS or
//! a token. Requests carry the loops' identity as the authentication
//! middleware would have set it.

use axum::Router;
use kube::Client;

use crate::api;
use crate::identity::Identity;

/// The user the loops act as (an admin: they write every kind).
pub const USER: &str = "system:kube-controller-manager";

pub fn in_process(objects: api::objects::Objects) -> Client {
    let router: Router = api::in_process(
        objects,
        Identity::Admin {
            user: USER.to_owned(),
        },
    );
    Client::new(router, "default")
}
