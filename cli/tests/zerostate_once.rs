//! The zerostate is read and parsed once per process (issue #20): two data directories of the same chain,
//! each importing the fixture chain through its own pipeline and inspecting how stored blocks were proven,
//! share one proof checker. This file holds one test so that the process's count is this test's alone.

use regolith_test_support::{archive_1_path, fixtures};
use std::net::{Ipv4Addr, SocketAddr};

use regolith_formats::archive::{ArchiveEntryType, ArchiveReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_data_dirs_of_one_chain_parse_its_zerostate_once() {
    let mc_blocks: Vec<_> =
        ArchiveReader::new_compressed(std::fs::File::open(archive_1_path()).unwrap())
            .unwrap()
            .map(Result::unwrap)
            .filter(|e| e.ty == ArchiveEntryType::Block && e.block_id.is_masterchain())
            .map(|e| e.block_id)
            .collect();
    assert!(mc_blocks.len() > 10);
    assert_eq!(regolith_node::trust::proofs::zerostate_parses(), 0);

    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    for dir in &dirs {
        let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let (_, _, storage) =
            regolith_testbed::fixture::import_fixture_chain(dir.path(), &fixtures(), listen)
                .await
                .unwrap();
        // Every mc block was verified on import; inspecting a few verifies their stored proofs again, each
        // call with a verifier of its own.
        for id in mc_blocks.iter().step_by(mc_blocks.len() / 5) {
            let handle = storage.handles().load_handle(id).unwrap().unwrap();
            let proven = regolith_node::trust::proofs::describe_stored(&storage, &handle).await;
            assert!(proven["signatures"].as_u64().unwrap() > 0, "{id}: {proven}");
        }
    }
    assert_eq!(
        regolith_node::trust::proofs::zerostate_parses(),
        1,
        "the zerostate was parsed more than once"
    );
}
