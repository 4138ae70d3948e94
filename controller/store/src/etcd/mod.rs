//! The store on etcd, for controllers that run replicated: etcd's revision
//! is the revision, its transactions do the compare-and-swap, its watch
//! feeds watchers. Keys are used as given (no prefix is added), so an
//! etcd cluster serves one Sluice control plane.

mod errors;

use std::sync::Arc;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, DeleteOptions, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse,
    TxnResponse, WatchOptions,
};
use futures::StreamExt;

use crate::error::{Result, StoreError};
use crate::keys;
use crate::store::{Store, WatchStream};
use crate::types::{Event, EventKind, Kv, ListOptions, ListPage, Revision, Write};
use errors::RevisionRefusal;

/// The store on an etcd cluster. Cheap to clone (the client is shared).
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
}

impl EtcdStore {
    pub async fn connect(endpoints: &[String]) -> Result<Self> {
        let client = Client::connect(endpoints, None).await?;
        Ok(EtcdStore { client })
    }

    pub fn from_client(client: Client) -> Self {
        EtcdStore { client }
    }

    /// The etcd client, for what the store does not cover (leases).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Turns a refused read at `requested` into the store's error.
    async fn revision_error(&self, err: etcd_client::Error, requested: Revision) -> StoreError {
        match errors::revision_refusal(&err) {
            Some(RevisionRefusal::Compacted) => StoreError::Compacted {
                requested,
                compacted: self.compacted_revision(requested).await,
            },
            Some(RevisionRefusal::Future) => StoreError::FutureRevision {
                requested,
                current: self.current_revision().await.unwrap_or(requested - 1),
            },
            None => err.into(),
        }
    }

    /// etcd does not say where its history starts except to a watch that
    /// asks for older history: ask one. Only on the error path.
    async fn compacted_revision(&self, requested: Revision) -> Revision {
        let probe = async {
            let opts = WatchOptions::new().with_start_revision(requested.max(1));
            let mut stream = self.client.clone().watch("\0", Some(opts)).await.ok()?;
            while let Some(Ok(resp)) = stream.next().await {
                if resp.compact_revision() > 0 {
                    return Some(resp.compact_revision());
                }
                if resp.canceled() || !resp.events().is_empty() {
                    return None;
                }
            }
            None
        };
        let found = tokio::time::timeout(std::time::Duration::from_secs(5), probe).await;
        // Unknown: at least the next revision is gone.
        found.ok().flatten().unwrap_or(requested + 1)
    }
}

fn header_revision(resp: &TxnResponse) -> Result<Revision> {
    resp.header()
        .map(|h| h.revision())
        .ok_or_else(|| StoreError::Corrupt("etcd answered without a header".into()))
}

fn to_kv(kv: &KeyValue) -> Result<Kv> {
    Ok(Kv {
        key: key_str(kv)?,
        value: kv.value().to_vec(),
        create_rev: kv.create_revision(),
        mod_rev: kv.mod_revision(),
    })
}

fn key_str(kv: &KeyValue) -> Result<String> {
    kv.key_str()
        .map(str::to_owned)
        .map_err(|_| StoreError::Corrupt("a key in etcd is not UTF-8".into()))
}

/// The key a failed compare-and-swap read back (its `or_else` get).
fn read_back(resp: &TxnResponse) -> Option<KeyValue> {
    resp.op_responses().into_iter().find_map(|op| match op {
        TxnOpResponse::Get(g) => g.kvs().first().cloned(),
        _ => None,
    })
}

/// The range of keys under `prefix`: etcd's key and range_end. An empty
/// key is not a key to etcd; `\0` as the end means "to the last key".
/// Keys per etcd range request when listing: 1 000 objects of a few KiB
/// each stay well under gRPC's 4 MiB message limit.
const LIST_CHUNK: usize = 1_000;

fn range(prefix: &str, start: String) -> (Vec<u8>, Vec<u8>) {
    let start = if start.is_empty() {
        vec![0]
    } else {
        start.into_bytes()
    };
    let end = keys::prefix_end(prefix.as_bytes()).unwrap_or_else(|| vec![0]);
    (start, end)
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<Kv>> {
        let resp = self.client.clone().get(key, None).await?;
        resp.kvs().first().map(to_kv).transpose()
    }

    async fn list(&self, opts: ListOptions<'_>) -> Result<ListPage> {
        let want = opts.limit.filter(|l| *l > 0);
        let mut items: Vec<Kv> = Vec::new();
        let mut rev = opts.at_revision;
        let mut after: Option<String> = opts.start_after.map(str::to_owned);
        // In chunks at one revision: a single etcd response is bounded by
        // gRPC's 4 MiB message limit, which 100 000 Pods exceed many times.
        loop {
            let chunk = want.map_or(LIST_CHUNK, |w| (w - items.len()).min(LIST_CHUNK));
            let (start, end) = range(opts.prefix, keys::page_start(opts.prefix, after.as_deref()));
            let mut get = GetOptions::new()
                .with_range(end)
                .with_limit(i64::try_from(chunk).unwrap_or(i64::MAX));
            if let Some(r) = rev {
                get = get.with_revision(r);
            }
            let resp = match self.client.clone().get(start, Some(get)).await {
                Ok(r) => r,
                Err(e) => {
                    return Err(match rev {
                        Some(r) => self.revision_error(e, r).await,
                        None => e.into(),
                    })
                }
            };
            let current = resp.header().map(|h| h.revision()).unwrap_or_default();
            let revision = *rev.get_or_insert(current);
            let kvs: Vec<Kv> = resp.kvs().iter().map(to_kv).collect::<Result<_>>()?;
            after = kvs.last().map(|kv| kv.key.clone()).or(after);
            items.extend(kvs);
            let full = want.is_some_and(|w| items.len() >= w);
            if !resp.more() || full {
                return Ok(ListPage {
                    items,
                    revision,
                    more: resp.more(),
                });
            }
        }
    }

    async fn create(&self, key: &str, value: Vec<u8>) -> Result<Revision> {
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None)]);
        let resp = self.client.clone().txn(txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::AlreadyExists {
                key: key.to_owned(),
            });
        }
        header_revision(&resp)
    }

    async fn update(
        &self,
        key: &str,
        value: Vec<u8>,
        expected_mod_rev: Revision,
    ) -> Result<Revision> {
        // The key must exist: a missing key's mod_revision is 0 too.
        let txn = Txn::new()
            .when([
                Compare::create_revision(key, CompareOp::Greater, 0),
                Compare::mod_revision(key, CompareOp::Equal, expected_mod_rev),
            ])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)]);
        let resp = self.client.clone().txn(txn).await?;
        if resp.succeeded() {
            return header_revision(&resp);
        }
        Err(refused(key, expected_mod_rev, read_back(&resp)))
    }

    async fn delete(
        &self,
        key: &str,
        expected_mod_rev: Option<Revision>,
    ) -> Result<(Revision, Kv)> {
        let mut when = vec![Compare::create_revision(key, CompareOp::Greater, 0)];
        if let Some(expected) = expected_mod_rev {
            when.push(Compare::mod_revision(key, CompareOp::Equal, expected));
        }
        let txn = Txn::new()
            .when(when)
            .and_then([TxnOp::delete(
                key,
                Some(DeleteOptions::new().with_prev_key()),
            )])
            .or_else([TxnOp::get(key, None)]);
        let resp = self.client.clone().txn(txn).await?;
        if !resp.succeeded() {
            return Err(refused(
                key,
                expected_mod_rev.unwrap_or(0),
                read_back(&resp),
            ));
        }
        let prev = resp.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Delete(d) => d.prev_kvs().first().cloned(),
            _ => None,
        });
        let prev = prev.ok_or_else(|| {
            StoreError::Corrupt(format!("etcd deleted {key} without its previous value"))
        })?;
        Ok((header_revision(&resp)?, to_kv(&prev)?))
    }

    async fn txn(&self, writes: Vec<Write>) -> Result<Vec<Revision>> {
        crate::txn::check_keys(&writes)?;
        let mut when = Vec::new();
        let mut then = Vec::with_capacity(writes.len());
        for w in &writes {
            let key = w.key();
            match w {
                Write::Create { value, .. } => {
                    when.push(Compare::create_revision(key, CompareOp::Equal, 0));
                    then.push(TxnOp::put(key, value.clone(), None));
                }
                Write::Update {
                    value,
                    expected_mod_rev,
                    ..
                } => {
                    when.push(Compare::create_revision(key, CompareOp::Greater, 0));
                    when.push(Compare::mod_revision(
                        key,
                        CompareOp::Equal,
                        *expected_mod_rev,
                    ));
                    then.push(TxnOp::put(key, value.clone(), None));
                }
                Write::Delete {
                    expected_mod_rev, ..
                } => {
                    when.push(Compare::create_revision(key, CompareOp::Greater, 0));
                    if let Some(e) = expected_mod_rev {
                        when.push(Compare::mod_revision(key, CompareOp::Equal, *e));
                    }
                    then.push(TxnOp::delete(key, None));
                }
            }
        }
        // Refused: every key read back, to name the first write refused.
        let read: Vec<TxnOp> = writes.iter().map(|w| TxnOp::get(w.key(), None)).collect();
        let txn = Txn::new().when(when).and_then(then).or_else(read);
        let resp = self.client.clone().txn(txn).await?;
        if resp.succeeded() {
            let rev = header_revision(&resp)?;
            return Ok(vec![rev; writes.len()]);
        }
        let now: Vec<Option<Revision>> = resp
            .op_responses()
            .into_iter()
            .map(|op| match op {
                TxnOpResponse::Get(g) => g.kvs().first().map(KeyValue::mod_revision),
                _ => None,
            })
            .collect();
        let refused = writes
            .iter()
            .zip(now)
            .find_map(|(w, cur)| crate::txn::refusal(w, cur));
        // A write refused when compared but not when read back: another
        // writer changed the key in between; the caller reads again.
        Err(refused.unwrap_or_else(|| StoreError::Conflict {
            key: writes
                .first()
                .map(|w| w.key().to_owned())
                .unwrap_or_default(),
            expected: 0,
            current: 0,
        }))
    }

    async fn current_revision(&self) -> Result<Revision> {
        let opts = GetOptions::new().with_count_only();
        let resp = self.client.clone().get("\0", Some(opts)).await?;
        resp.header()
            .map(|h| h.revision())
            .ok_or_else(|| StoreError::Corrupt("etcd answered without a header".into()))
    }

    async fn watch(&self, prefix: &str, from_rev: Revision) -> Result<WatchStream> {
        let (key, end) = range(prefix, prefix.to_owned());
        let opts = WatchOptions::new()
            .with_range(end)
            .with_start_revision(from_rev + 1)
            .with_prev_key();
        let stream = self.client.clone().watch(key, Some(opts)).await?;
        Ok(Box::pin(watch_events(stream, from_rev)))
    }

    async fn compact(&self, rev: Revision) -> Result<()> {
        let opts = etcd_client::CompactionOptions::new().with_physical();
        match self.client.clone().compact(rev, Some(opts)).await {
            Ok(_) => Ok(()),
            Err(e) => match errors::revision_refusal(&e) {
                // Already compacted there or further: nothing to do.
                Some(RevisionRefusal::Compacted) => Ok(()),
                Some(RevisionRefusal::Future) => Err(StoreError::FutureRevision {
                    requested: rev,
                    current: self.current_revision().await?,
                }),
                None => Err(e.into()),
            },
        }
    }
}

/// Why a compare-and-swap failed, from the key as it was read back.
fn refused(key: &str, expected: Revision, now: Option<KeyValue>) -> StoreError {
    match now {
        None => StoreError::NotFound {
            key: key.to_owned(),
        },
        Some(kv) => StoreError::Conflict {
            key: key.to_owned(),
            expected,
            current: kv.mod_revision(),
        },
    }
}

/// etcd's watch responses as the store's events; a compaction or a
/// cancellation ends the stream with an error.
fn watch_events(
    stream: etcd_client::WatchStream,
    from_rev: Revision,
) -> impl futures::Stream<Item = Result<Arc<Event>>> + Send {
    let events = stream
        .map(move |resp| -> Vec<Result<Arc<Event>>> {
            let resp = match resp {
                Ok(r) => r,
                Err(e) => return vec![Err(e.into())],
            };
            if resp.compact_revision() > 0 {
                return vec![Err(StoreError::Compacted {
                    requested: from_rev,
                    compacted: resp.compact_revision(),
                })];
            }
            if resp.canceled() {
                return vec![Err(StoreError::Etcd(etcd_client::Error::WatchError(
                    format!("watch canceled by etcd: {}", resp.cancel_reason()),
                )))];
            }
            resp.events()
                .iter()
                .map(|e| to_event(e).map(Arc::new))
                .collect()
        })
        .flat_map(futures::stream::iter);
    // End right after the first error, without waiting for etcd's next
    // message: a broken watch has nothing more to say.
    futures::stream::unfold(
        (Box::pin(events), false),
        |(mut events, failed)| async move {
            if failed {
                return None;
            }
            let item = events.next().await?;
            let failed = item.is_err();
            Some((item, (events, failed)))
        },
    )
}

fn to_event(e: &etcd_client::Event) -> Result<Event> {
    let kv = e
        .kv()
        .ok_or_else(|| StoreError::Corrupt("etcd watch event without a key".into()))?;
    let kind = match e.event_type() {
        etcd_client::EventType::Put => EventKind::Put,
        etcd_client::EventType::Delete => EventKind::Delete,
    };
    Ok(Event {
        kind,
        key: key_str(kv)?,
        value: if kind == EventKind::Delete {
            Vec::new()
        } else {
            kv.value().to_vec()
        },
        prev_value: e.prev_kv().map(|p| p.value().to_vec()),
        mod_rev: kv.mod_revision(),
    })
}
