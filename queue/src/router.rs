//! Router addresses and the partition router (queue.md §2 "Router").
//!
//! Lookup for (src, dst): the `dst` half by destination, else the `src` half by source, else partition 0.
//! A VarAddr never matches. In the serialized form an address listed under several partitions of one half
//! gets the highest of them, on every path (live apply, network diffs, import).

use std::collections::{BTreeMap, BTreeSet};

use regolith_formats::queue_diff::{RouterAddr as TlRouterAddr, RouterPartition};
use regolith_formats::HashBytes;
use tycho_types::models::{IntAddr, StdAddr};

use crate::error::{QueueError, Result};
use crate::key::PartitionIdx;

/// Length of a stored router address: workchain (1) ‖ account (32).
pub(crate) const ROUTER_ADDR_LEN: usize = 33;

/// A std account address as the router and the statistics see it, ordered by workchain, then account.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouterAddr {
    /// Workchain.
    pub workchain: i8,
    /// Account id.
    pub account: HashBytes,
}

impl RouterAddr {
    /// The smallest address.
    pub const MIN: Self = Self {
        workchain: i8::MIN,
        account: HashBytes::ZERO,
    };
    /// The largest address.
    pub const MAX: Self = Self {
        workchain: i8::MAX,
        account: HashBytes([0xff; 32]),
    };

    /// The router address of an internal address; a VarAddr has none. Anycast is ignored.
    pub fn from_int_addr(addr: &IntAddr) -> Option<Self> {
        match addr {
            IntAddr::Std(std) => Some(Self::from_std(std)),
            IntAddr::Var(_) => None,
        }
    }

    /// The router address of a std address.
    pub fn from_std(addr: &StdAddr) -> Self {
        Self {
            workchain: addr.workchain,
            account: addr.address,
        }
    }

    /// The address prefix: the first 8 bytes of the account, big-endian.
    pub fn prefix(&self) -> u64 {
        u64::from_be_bytes(self.account.0[..8].try_into().unwrap())
    }

    /// Storage form: workchain as one two's-complement byte ‖ account.
    pub fn to_bytes(&self) -> [u8; ROUTER_ADDR_LEN] {
        let mut out = [0u8; ROUTER_ADDR_LEN];
        out[0] = self.workchain as u8;
        out[1..].copy_from_slice(&self.account.0);
        out
    }

    /// Decodes the storage form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        if bytes.len() != ROUTER_ADDR_LEN {
            return Err(QueueError::invalid(format!(
                "router address of {} bytes, expected {ROUTER_ADDR_LEN}",
                bytes.len()
            )));
        }
        Ok(Self {
            workchain: bytes[0] as i8,
            account: HashBytes(bytes[1..].try_into().unwrap()),
        })
    }
}

impl From<TlRouterAddr> for RouterAddr {
    fn from(a: TlRouterAddr) -> Self {
        Self {
            workchain: a.workchain,
            account: a.account,
        }
    }
}

impl From<RouterAddr> for TlRouterAddr {
    fn from(a: RouterAddr) -> Self {
        Self {
            workchain: a.workchain,
            account: a.account,
        }
    }
}

/// One half of the serialized router: partition → ordered set of addresses.
pub type RouterHalf = BTreeMap<PartitionIdx, BTreeSet<RouterAddr>>;

/// The partition router of a diff: `src` and `dst` halves mapping addresses to partitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionRouter {
    src: BTreeMap<RouterAddr, PartitionIdx>,
    dst: BTreeMap<RouterAddr, PartitionIdx>,
}

impl PartitionRouter {
    /// An empty router: everything goes to partition 0.
    pub fn new() -> Self {
        Self::default()
    }

    /// The partition of a message (src, dst): dst half, else src half, else 0.
    pub fn lookup(&self, src: &IntAddr, dst: &IntAddr) -> PartitionIdx {
        if let Some(p) = RouterAddr::from_int_addr(dst).and_then(|a| self.dst.get(&a)) {
            return *p;
        }
        if let Some(p) = RouterAddr::from_int_addr(src).and_then(|a| self.src.get(&a)) {
            return *p;
        }
        0
    }

    /// Routes messages from `addr` to `partition` (not 0; a VarAddr is rejected).
    pub fn insert_src(&mut self, addr: &IntAddr, partition: PartitionIdx) -> Result<()> {
        let addr = Self::check_insert(addr, partition)?;
        self.src.insert(addr, partition);
        Ok(())
    }

    /// Routes messages to `addr` to `partition` (not 0; a VarAddr is rejected).
    pub fn insert_dst(&mut self, addr: &IntAddr, partition: PartitionIdx) -> Result<()> {
        let addr = Self::check_insert(addr, partition)?;
        self.dst.insert(addr, partition);
        Ok(())
    }

    fn check_insert(addr: &IntAddr, partition: PartitionIdx) -> Result<RouterAddr> {
        if partition == 0 {
            return Err(QueueError::invalid(
                "router: partition 0 cannot be assigned explicitly",
            ));
        }
        RouterAddr::from_int_addr(addr)
            .ok_or_else(|| QueueError::invalid("router: a VarAddr cannot be routed"))
    }

    /// Builds a router from its serialized halves; a repeated address gets its highest partition.
    pub fn from_halves(src: &RouterHalf, dst: &RouterHalf) -> Self {
        fn build(half: &RouterHalf) -> BTreeMap<RouterAddr, PartitionIdx> {
            let mut out = BTreeMap::new();
            // Ascending partitions, so a later (higher) one replaces an earlier one.
            for (p, addrs) in half {
                for a in addrs {
                    out.insert(*a, *p);
                }
            }
            out
        }
        Self {
            src: build(src),
            dst: build(dst),
        }
    }

    /// Builds a router from the TL halves of a diff (`router_partitions_src/dst`).
    pub fn from_tl(src: &[RouterPartition], dst: &[RouterPartition]) -> Self {
        Self::from_halves(&half_from_tl(src), &half_from_tl(dst))
    }

    /// The serialized `src` half.
    pub fn src_half(&self) -> RouterHalf {
        to_half(&self.src)
    }

    /// The serialized `dst` half.
    pub fn dst_half(&self) -> RouterHalf {
        to_half(&self.dst)
    }

    /// Both halves in the TL layout of a diff.
    pub fn to_tl(&self) -> (Vec<RouterPartition>, Vec<RouterPartition>) {
        (half_to_tl(&self.src_half()), half_to_tl(&self.dst_half()))
    }

    /// Whether no address is routed.
    pub fn is_empty(&self) -> bool {
        self.src.is_empty() && self.dst.is_empty()
    }
}

fn to_half(map: &BTreeMap<RouterAddr, PartitionIdx>) -> RouterHalf {
    let mut out = RouterHalf::new();
    for (a, p) in map {
        out.entry(*p).or_default().insert(*a);
    }
    out
}

/// Converts a TL router half into the map form.
pub(crate) fn half_from_tl(partitions: &[RouterPartition]) -> RouterHalf {
    let mut out = RouterHalf::new();
    for p in partitions {
        out.entry(p.index)
            .or_default()
            .extend(p.accounts.iter().map(|a| RouterAddr::from(*a)));
    }
    out
}

/// Converts a map-form router half into the TL layout.
pub(crate) fn half_to_tl(half: &RouterHalf) -> Vec<RouterPartition> {
    half.iter()
        .map(|(p, addrs)| RouterPartition {
            index: *p,
            accounts: addrs.iter().map(|a| TlRouterAddr::from(*a)).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tycho_types::models::VarAddr;

    fn std(wc: i8, byte: u8) -> IntAddr {
        IntAddr::Std(StdAddr::new(wc, HashBytes([byte; 32])))
    }

    fn var() -> IntAddr {
        IntAddr::Var(VarAddr {
            anycast: None,
            address_len: tycho_types::num::Uint9::new(16),
            workchain: 0,
            address: vec![1, 2],
        })
    }

    #[test]
    fn lookup_and_insert() {
        let (m1, b1, b2) = (std(-1, 1), std(0, 3), std(0, 4));
        let mut r = PartitionRouter::new();
        r.insert_dst(&m1, 1).unwrap();
        r.insert_src(&b1, 2).unwrap();
        assert_eq!(r.lookup(&b2, &m1), 1, "dst only");
        assert_eq!(r.lookup(&b1, &b2), 2, "src only");
        assert_eq!(r.lookup(&b1, &m1), 1, "both: dst wins");
        assert_eq!(r.lookup(&b2, &b2), 0, "neither");
        assert_eq!(r.lookup(&var(), &var()), 0, "VarAddr never matches");
        assert!(r.insert_dst(&b2, 0).is_err());
        assert!(r.insert_src(&var(), 1).is_err());
        r.insert_dst(&m1, 5).unwrap();
        assert_eq!(r.lookup(&b2, &m1), 5, "re-insert replaces");
    }

    #[test]
    fn duplicated_address_gets_highest_partition() {
        let b1 = RouterAddr::from_int_addr(&std(0, 3)).unwrap();
        let mut half = RouterHalf::new();
        for p in [1, 2, 3] {
            half.entry(p).or_default().insert(b1);
        }
        let r = PartitionRouter::from_halves(&half, &RouterHalf::new());
        assert_eq!(r.lookup(&std(0, 3), &std(0, 9)), 3);
        let r = PartitionRouter::from_tl(&half_to_tl(&half), &[]);
        assert_eq!(r.lookup(&std(0, 3), &std(0, 9)), 3);
    }

    #[test]
    fn explicit_zero_ends_lookup() {
        let b1 = RouterAddr::from_int_addr(&std(0, 3)).unwrap();
        let m1 = RouterAddr::from_int_addr(&std(-1, 1)).unwrap();
        let dst: RouterHalf = [(0, [m1].into())].into();
        let src: RouterHalf = [(1, [b1].into())].into();
        let r = PartitionRouter::from_halves(&src, &dst);
        assert_eq!(r.lookup(&std(0, 3), &std(-1, 1)), 0);
        assert_eq!(r.lookup(&std(0, 3), &std(-1, 2)), 1);
    }

    #[test]
    fn byte_form() {
        let a = RouterAddr {
            workchain: -1,
            account: HashBytes([0x11; 32]),
        };
        let bytes = a.to_bytes();
        assert_eq!(bytes[0], 0xff);
        assert_eq!(RouterAddr::from_bytes(&bytes).unwrap(), a);
        assert!(RouterAddr::MIN < RouterAddr::MAX);
    }
}
