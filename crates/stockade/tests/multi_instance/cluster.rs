//! The cluster of a scenario: one throwaway PostgreSQL database, one Redis
//! deployment (unless the engine is PostgreSQL: a server, a Sentinel group
//! or a Redis Cluster), three `stockade serve` instances on them, and the
//! blocking server operations the faults need.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use stockade_test_support::{
    PartitionProxy, PostgresServer, RedisCluster, RedisSentinelGroup, RedisServer,
};

use crate::api;
use crate::evidence::{SkuStock, Terms};
use crate::flags::Engine;
use crate::history::Answer;
use crate::instance::Instance;
use crate::keeper::Keeper;

/// How many `stockade serve` instances share the servers.
pub const INSTANCES: usize = 3;

/// The current base URL of each instance (an instance restarted after a
/// kill listens on a new port).
#[derive(Debug, Clone)]
pub struct Endpoints(Arc<RwLock<Vec<String>>>);

impl Endpoints {
    /// The base URL of instance `index`.
    pub fn get(&self, index: usize) -> String {
        self.0.read().unwrap()[index].clone()
    }

    fn set(&self, index: usize, url: String) {
        self.0.write().unwrap()[index] = url;
    }
}

/// The Redis the instances share.
pub enum Redis {
    /// One server.
    Single(RedisServer),
    /// A primary, a replica and three sentinels.
    Sentinel(RedisSentinelGroup),
    /// Three primaries.
    Cluster(RedisCluster),
}

impl Redis {
    /// Starts the deployment `engine` runs on. Blocking.
    fn start(engine: Engine) -> Self {
        match engine {
            Engine::RedisSentinel => {
                Self::Sentinel(RedisSentinelGroup::start().expect("start a Sentinel group"))
            }
            Engine::RedisCluster => {
                Self::Cluster(RedisCluster::start().expect("start a Redis Cluster"))
            }
            _ => Self::Single(RedisServer::start().expect("start redis-server")),
        }
    }

    /// The URL `--redis-url` takes.
    fn url(&self) -> String {
        match self {
            Self::Single(server) => server.url(),
            Self::Sentinel(group) => group.url(),
            Self::Cluster(cluster) => cluster.url(),
        }
    }
}

/// The servers and instances of one scenario, shared by all its rounds.
///
/// Fields drop in order: the instances first, then the servers, then the
/// keeper thread that started them.
pub struct Cluster {
    instances: Vec<Arc<Mutex<Instance>>>,
    endpoints: Endpoints,
    client: reqwest::Client,
    redis: Option<Arc<Mutex<Redis>>>,
    postgres: Arc<Mutex<PostgresServer>>,
    /// The proxy between the partitioned instance and Redis, if any.
    partition: Option<PartitionProxy>,
    /// The URL of the instances' PostgreSQL database.
    database: String,
    /// When each instance's current process was started and when it
    /// listened (wall clock): its store name, a UUIDv7, was made between.
    starts: Mutex<Vec<(SystemTime, SystemTime)>>,
    /// Last, so that it outlives the servers it started.
    keeper: Keeper,
}

impl Cluster {
    /// Starts PostgreSQL (a fresh database), Redis if the engine needs it,
    /// and three instances of `engine`, each also given `extra_args`; the
    /// instance `partitioned` reaches Redis through a [`PartitionProxy`].
    pub async fn start(engine: Engine, extra_args: &[String], partitioned: Option<usize>) -> Self {
        Self::start_with_env(engine, extra_args, partitioned, |_| Vec::new()).await
    }

    /// [`Cluster::start`], instance `i` also given the variables `env(i)`
    /// (a clock set ahead: `crate::skew`).
    pub async fn start_with_env(
        engine: Engine,
        extra_args: &[String],
        partitioned: Option<usize>,
        env: impl Fn(usize) -> Vec<(String, String)>,
    ) -> Self {
        let keeper = Keeper::start();
        let postgres = keeper
            .run(|| PostgresServer::start().expect("start PostgreSQL"))
            .await;
        let database = postgres
            .fresh_database()
            .await
            .expect("a fresh PostgreSQL database");
        let redis = if engine.needs_redis() {
            Some(keeper.run(move || Redis::start(engine)).await)
        } else {
            None
        };
        let mut args = engine.serve_args(redis.as_ref().map(Redis::url).as_deref(), &database);
        args.extend_from_slice(extra_args);
        eprintln!(
            "cluster: {INSTANCES} instances of `stockade serve {}`",
            args.join(" ")
        );
        let partition = partitioned.map(|_| {
            let redis = redis.as_ref().expect("a partition needs a Redis");
            let Redis::Single(server) = redis else {
                panic!("a partition scenario runs on a single Redis server");
            };
            let target = ([127, 0, 0, 1], server.port()).into();
            PartitionProxy::start(target).expect("start the partition proxy")
        });
        let mut instances = Vec::new();
        let mut urls = Vec::new();
        let mut starts = Vec::new();
        for index in 0..INSTANCES {
            let mut args = args.clone();
            if let (Some(proxy), true) = (&partition, partitioned == Some(index)) {
                let at = args
                    .iter()
                    .position(|a| a == "--redis-url")
                    .expect("a Redis URL to proxy");
                args[at + 1] = format!("redis://127.0.0.1:{}", proxy.port());
                eprintln!("cluster: instance {index} reaches Redis through the partition proxy");
            }
            let before = SystemTime::now();
            let own = env(index);
            let instance = keeper.run(move || Instance::start(index, args, own)).await;
            starts.push((before, SystemTime::now()));
            eprintln!("cluster: instance {index} at {}", instance.url());
            urls.push(instance.url().to_owned());
            instances.push(Arc::new(Mutex::new(instance)));
        }
        Self {
            redis: redis.map(|r| Arc::new(Mutex::new(r))),
            postgres: Arc::new(Mutex::new(postgres)),
            partition,
            database,
            starts: Mutex::new(starts),
            instances,
            endpoints: Endpoints(Arc::new(RwLock::new(urls))),
            client: api::client(),
            keeper,
        }
    }

    /// The instances' current URLs.
    pub fn endpoints(&self) -> Endpoints {
        self.endpoints.clone()
    }

    /// The HTTP client.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// Creates the sale of `terms` (of `skus` if given, else of its stock
    /// as one SKU, over `shards` shards) through the first instance that
    /// accepts it, trying for up to 20 s. A sale that cannot be created is
    /// a harness failure.
    pub async fn create_sale(&self, terms: &Terms, skus: &[SkuStock], shards: u16) {
        let Terms {
            sale,
            stock,
            per_user_limit,
            hold_seconds,
        } = terms;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut attempt = 0;
        loop {
            let index = attempt % INSTANCES;
            let url = self.endpoints.get(index);
            let (client, limit, hold) = (&self.client, *per_user_limit, *hold_seconds);
            let answer = if shards > 1 {
                api::create_sharded_sale(client, &url, sale, *stock, limit, hold, shards).await
            } else if skus.is_empty() {
                api::create_sale(client, &url, sale, *stock, limit, hold).await
            } else {
                api::create_sku_sale(client, &url, sale, skus, limit, hold).await
            };
            if matches!(answer.status(), Some(200 | 201)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "creating sale {sale}: no instance accepted it within 20 s; \
                 instance {index} last answered {answer:?}"
            );
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Instance `index`'s `stockade_orders_total{sale,event="expired"}`.
    pub async fn expired_counter(&self, index: usize, sale: &str) -> Result<u64, String> {
        let url = self.endpoints.get(index);
        let text = api::metrics(&self.client, &url)
            .await
            .map_err(|e| format!("instance {index}: {e}"))?;
        Ok(api::orders_counter(&text, sale, "expired"))
    }

    /// Runs `f` on the Redis server on the keeper thread.
    pub async fn redis<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut RedisServer) -> T + Send + 'static,
    ) -> T {
        self.on_redis(move |redis| match redis {
            Redis::Single(server) => f(server),
            _ => panic!("this scenario's Redis is not a single server"),
        })
        .await
    }

    /// Runs `f` on the Sentinel group on the keeper thread.
    pub async fn sentinel<T: Send + 'static>(
        &self,
        f: impl FnOnce(&RedisSentinelGroup) -> T + Send + 'static,
    ) -> T {
        self.on_redis(move |redis| match redis {
            Redis::Sentinel(group) => f(group),
            _ => panic!("this scenario's Redis is not a Sentinel group"),
        })
        .await
    }

    /// Runs `f` on the Redis Cluster on the keeper thread.
    pub async fn redis_cluster<T: Send + 'static>(
        &self,
        f: impl FnOnce(&RedisCluster) -> T + Send + 'static,
    ) -> T {
        self.on_redis(move |redis| match redis {
            Redis::Cluster(cluster) => f(cluster),
            _ => panic!("this scenario's Redis is not a Redis Cluster"),
        })
        .await
    }

    fn runs_on_redis_cluster(&self) -> bool {
        self.redis
            .as_ref()
            .is_some_and(|redis| matches!(*redis.lock().unwrap(), Redis::Cluster(_)))
    }

    /// On a Redis Cluster: the primary (port) holding the keys of each of
    /// `sales` now, checked on the node itself (`EXISTS` of the sale hash).
    pub async fn primaries_of(&self, sales: Vec<String>) -> Vec<u16> {
        self.redis_cluster(move |cluster| {
            sales
                .iter()
                .map(|sale| {
                    let key = format!("stockade:{{{sale}}}:sale");
                    let slot = cluster.slot_of(&key).expect("CLUSTER KEYSLOT");
                    let owner = cluster.owner_of(slot).expect("CLUSTER NODES");
                    let node = cluster.node(owner).expect("the owner is a node");
                    let exists = node.command(&["EXISTS", &key]).expect("EXISTS");
                    assert!(
                        exists.starts_with(":1"),
                        "sale {sale}: slot {slot} belongs to port {owner}, which lacks {key}: {exists}"
                    );
                    owner
                })
                .collect()
        })
        .await
    }

    async fn on_redis<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Redis) -> T + Send + 'static,
    ) -> T {
        let redis = Arc::clone(self.redis.as_ref().expect("this scenario has no Redis"));
        self.keeper.run(move || f(&mut redis.lock().unwrap())).await
    }

    /// The sale id of a round: `{base}`, or on a Redis Cluster `{base}` with
    /// the first suffix that puts the sale's keys on primary `round - 1`
    /// (mod 3), so the rounds' sales spread over every primary.
    pub async fn sale_id(&self, base: String, round: usize) -> String {
        if !self.runs_on_redis_cluster() {
            return base;
        }
        self.redis_cluster(move |cluster| {
            let target = cluster.ports()[(round - 1) % cluster.ports().len()];
            (0..1_000)
                .map(|n| format!("{base}-{n}"))
                .find(|sale| {
                    let slot = cluster
                        .slot_of(&format!("{{{sale}}}"))
                        .expect("CLUSTER KEYSLOT");
                    cluster.owner_of(slot).expect("CLUSTER NODES") == target
                })
                .expect("one of 1,000 names hashes to each primary")
        })
        .await
    }

    /// Runs `f` on the PostgreSQL server on the keeper thread.
    pub async fn postgres<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut PostgresServer) -> T + Send + 'static,
    ) -> T {
        let postgres = Arc::clone(&self.postgres);
        self.keeper
            .run(move || f(&mut postgres.lock().unwrap()))
            .await
    }

    /// Cuts the partitioned instance off from Redis.
    pub fn cut_partition(&self) {
        self.partition
            .as_ref()
            .expect("this scenario has no partitioned instance")
            .cut();
    }

    /// Heals the partition.
    pub fn heal_partition(&self) {
        self.partition
            .as_ref()
            .expect("this scenario has no partitioned instance")
            .heal();
    }

    /// SIGKILLs instance `index`.
    pub async fn kill_instance(&self, index: usize) {
        let instance = Arc::clone(&self.instances[index]);
        self.keeper
            .run(move || instance.lock().unwrap().kill())
            .await;
    }

    /// Starts the killed instance `index` again with the same flags.
    pub async fn restart_instance(&self, index: usize) {
        let instance = Arc::clone(&self.instances[index]);
        let before = SystemTime::now();
        let url = self
            .keeper
            .run(move || {
                let mut instance = instance.lock().unwrap();
                instance.restart();
                instance.url().to_owned()
            })
            .await;
        self.starts.lock().unwrap()[index] = (before, SystemTime::now());
        eprintln!("cluster: instance {index} restarted at {url}");
        self.endpoints.set(index, url);
    }

    /// The URL of the instances' PostgreSQL database.
    pub fn database_url(&self) -> &str {
        &self.database
    }

    /// The instance whose current process calls itself `name` in the
    /// store (a draw's `lease_owner`, a UUIDv7 made at its start): the
    /// one started within the millisecond `name` carries. None for a
    /// process killed since, or a name that is no UUIDv7.
    pub fn instance_named(&self, name: &str) -> Option<usize> {
        let hex: String = name.chars().filter(|c| *c != '-').take(12).collect();
        let made_ms = u64::from_str_radix(&hex, 16).ok()?;
        let ms = |at: SystemTime| {
            at.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64)
        };
        let starts = self.starts.lock().unwrap();
        starts
            .iter()
            .position(|&(before, after)| ms(before) <= made_ms && made_ms <= ms(after) + 1)
    }

    /// The last lines of every instance's log, for failure reports.
    pub fn log_tails(&self, lines: usize) -> String {
        let mut out = String::new();
        for (index, instance) in self.instances.iter().enumerate() {
            let instance = instance.lock().unwrap();
            out.push_str(&format!(
                "--- instance {index} ({}), last {lines} log lines:\n{}\n",
                instance.log_path().display(),
                instance.log_tail(lines)
            ));
        }
        out
    }

    /// Every instance's log lines that mention one of `needles` (order
    /// ids a violation names), so a failure shows what each instance did
    /// with the orders concerned.
    pub fn log_lines_naming(&self, needles: &[String]) -> String {
        let mut out = String::new();
        if needles.is_empty() {
            return out;
        }
        for (index, instance) in self.instances.iter().enumerate() {
            let instance = instance.lock().unwrap();
            let text = std::fs::read_to_string(instance.log_path()).unwrap_or_default();
            for line in text.lines() {
                if needles.iter().any(|n| line.contains(n.as_str())) {
                    out.push_str(&format!("instance {index}: {line}\n"));
                }
            }
        }
        out
    }

    /// The instances whose process ended by itself, with the last line of
    /// their log (why they gave up).
    pub fn exited_instances(&self) -> Vec<String> {
        let mut exited = Vec::new();
        for (index, instance) in self.instances.iter().enumerate() {
            let mut instance = instance.lock().unwrap();
            if instance.exited() {
                exited.push(format!(
                    "instance {index} exited by itself: {}",
                    instance.log_tail(1)
                ));
            }
        }
        exited
    }

    /// Asks every instance once; the answers in instance order.
    pub async fn ask_all<F, Fut>(&self, ask: F) -> Vec<Answer>
    where
        F: Fn(reqwest::Client, String) -> Fut,
        Fut: std::future::Future<Output = Answer>,
    {
        let mut answers = Vec::new();
        for index in 0..INSTANCES {
            answers.push(ask(self.client.clone(), self.endpoints.get(index)).await);
        }
        answers
    }
}
