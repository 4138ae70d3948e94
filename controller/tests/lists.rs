//! Lists through kube-rs on both stores (issue 9's cheap list path): the
//! streamed, spliced answer selects and pages exactly as kube-apiserver's
//! list does. Whole, in pages of 2 followed through `continue`, and with a
//! field selector (which decodes every object: the slow path) selecting
//! the same Pods, the items are the same, at one resourceVersion.

#[macro_use]
mod common;
use common::{Backend, Server};

use kube::api::{Api, ListParams, PostParams};
use sluice_model::k8s::Pod;

fn pod(i: usize) -> Pod {
    let (tier, node) = if i.is_multiple_of(2) {
        ("front", "node-1")
    } else {
        ("back", "node-2")
    };
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("p{i}"), "namespace": "default", "labels": {"tier": tier}},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]},
    }))
    .expect("pod")
}

fn pages_select_like_whole_lists(backend: Backend) {
    let s = Server::start(&format!("lists-{backend:?}").to_lowercase(), backend);
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let api: Api<Pod> = Api::namespaced(common::kube_client(&s).await, "default");
        for i in 0..7 {
            api.create(&PostParams::default(), &pod(i))
                .await
                .expect("create");
        }
        let labelled = ListParams::default().labels("tier=front");
        let whole = api.list(&labelled).await.expect("whole list");
        let names: Vec<_> = whole
            .items
            .iter()
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, ["p0", "p2", "p4", "p6"]);
        assert!(whole
            .items
            .iter()
            .all(|p| p.metadata.resource_version.is_some()));

        let mut paged = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut lp = labelled.clone().limit(2);
            if let Some(t) = &token {
                lp = lp.continue_token(t);
            }
            let page = api.list(&lp).await.expect("page");
            assert!(page.items.len() <= 2);
            paged.extend(page.items);
            token = page.metadata.continue_.filter(|c| !c.is_empty());
            if token.is_none() {
                assert_eq!(
                    page.metadata.resource_version,
                    whole.metadata.resource_version
                );
                break;
            }
        }
        assert_eq!(paged, whole.items, "pages of 2 give the whole list");

        let by_field = api
            .list(&ListParams::default().fields("spec.nodeName=node-1"))
            .await
            .expect("field list");
        assert_eq!(
            by_field.items, whole.items,
            "the slow path selects the same"
        );
        let all = api.list(&ListParams::default()).await.expect("all");
        assert_eq!(all.items.len(), 7);
    });
}

on_both_stores!(pages_select_like_whole_lists);
