//! Where a sale's shards live: hash tags chosen so the shards' slots fall
//! in different parts of Redis Cluster's 16,384 slots.
//!
//! The slot space is cut into as many equal ranges as the sale has shards;
//! shard 0 is the sale's own tag (its id) and each other shard takes the
//! first tag `<id>.<shard>.<n>` (n = 0, 1, …) whose slot lies in the range
//! after its predecessor's. A Cluster whose primaries own equal runs of
//! slots (as `redis-cli --cluster create` deals them) with as many
//! primaries as the sale has shards thus holds one shard on each primary.
//! The choice depends on the sale id and the shard count alone, so every
//! process finds the same keys without asking anyone. (`.` is outside the
//! sale id alphabet: no shard tag is another sale's id.)

/// Redis Cluster's slot count.
const SLOTS: u32 = 16_384;

/// The slot of a key whose hash tag is `tag`.
pub(super) fn slot(tag: &str) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(tag.as_bytes()) % SLOTS as u16
}

/// The hash tag of each of `shards` shards of `sale`.
pub(super) fn tags(sale: &str, shards: u16) -> Vec<String> {
    let n = u32::from(shards.max(1));
    let range_of = |slot: u16| u32::from(slot) * n / SLOTS;
    let home = range_of(slot(sale));
    let mut tags = vec![sale.to_owned()];
    for shard in 1..n {
        let wanted = (home + shard) % n;
        let tag = (0u32..)
            .map(|attempt| format!("{sale}.{shard}.{attempt}"))
            .find(|tag| range_of(slot(tag)) == wanted)
            .expect("some tag falls in every range");
        tags.push(tag);
    }
    tags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_redis_clusters() {
        // Values from `CLUSTER KEYSLOT` on a Redis 7 Cluster.
        assert_eq!(slot("foo"), 12_182);
        assert_eq!(slot("somekey"), 11_058);
    }

    #[test]
    fn each_shard_lands_in_its_own_range_of_slots() {
        for shards in [1u16, 2, 3, 4, 7, 16] {
            let tags = tags("hot-drop", shards);
            assert_eq!(tags.len(), usize::from(shards));
            assert_eq!(tags[0], "hot-drop");
            let mut ranges: Vec<u32> = tags
                .iter()
                .map(|tag| u32::from(slot(tag)) * u32::from(shards) / SLOTS)
                .collect();
            ranges.sort_unstable();
            ranges.dedup();
            assert_eq!(ranges.len(), usize::from(shards), "{tags:?}");
            assert_eq!(tags, super::tags("hot-drop", shards), "stable");
        }
    }
}
