//! TL requests through the service's dispatch (rpc.md §3): any body, every constructor, against a node that
//! holds the fixture chain. A body that decodes must re-encode to the bytes it was decoded from (requests have
//! fixed-size fields only, so the encoding is canonical; trailing bytes are accepted, §2.1). The service must
//! answer exactly the bodies that decode (§2.2 item 5), and every answer must decode as the client would.
#![no_main]

use libfuzzer_sys::fuzz_target;
use regolith_fuzz::{encode_request, fixture_node, response_round_trip, runtime};
use regolith_rpc::proto::{self, Method, RpcRequest};

fuzz_target!(|body: &[u8]| {
    let node = fixture_node();
    let decoded = RpcRequest::decode(body);
    if let Ok(request) = &decoded {
        let encoded = encode_request(request);
        assert_eq!(
            &body[..encoded.len()],
            &encoded[..],
            "encode(decode(x)) != x"
        );
        assert_eq!(RpcRequest::decode(&encoded).as_ref().ok(), Some(request));
    }
    let answer = runtime().block_on(node.service.handle_query(body));
    assert_eq!(
        answer.is_some(),
        decoded.is_ok(),
        "the service answers exactly the bodies that decode"
    );
    let (Some(answer), Ok(request)) = (answer, decoded) else {
        return;
    };
    let method = Method::of_body(body).expect("a decoded body has a method");
    let decodes = match request {
        RpcRequest::Ping(_) => answer[..] == tl_proto::serialize(proto::Pong)[..],
        RpcRequest::GetNextKeyBlockIds(_) => {
            response_round_trip::<proto::KeyBlockIds>(&answer).is_some()
        }
        RpcRequest::GetBlockFull(_) | RpcRequest::GetNextBlockFull(_) => {
            response_round_trip::<proto::BlockFull>(&answer).is_some()
        }
        RpcRequest::GetNextBlocksFull(_) => {
            response_round_trip::<proto::NextBlocks>(&answer).is_some()
        }
        RpcRequest::GetKeyBlockProof(_) => {
            response_round_trip::<proto::KeyBlockProof>(&answer).is_some()
        }
        RpcRequest::GetZerostateProof(_) => {
            response_round_trip::<proto::ZerostateProof>(&answer).is_some()
        }
        RpcRequest::GetArchiveInfo(_) => {
            response_round_trip::<proto::ArchiveInfo>(&answer).is_some()
        }
        RpcRequest::GetPersistentShardStateInfo(_) | RpcRequest::GetPersistentQueueStateInfo(_) => {
            response_round_trip::<proto::PersistentStateInfo>(&answer).is_some()
        }
        RpcRequest::GetBlockDataChunk(_)
        | RpcRequest::GetArchiveChunk(_)
        | RpcRequest::GetPersistentShardStateChunk(_)
        | RpcRequest::GetPersistentShardStateRootChunk(_)
        | RpcRequest::GetPersistentShardStatePartChunk(_)
        | RpcRequest::GetPersistentQueueStateChunk(_) => {
            response_round_trip::<proto::Data>(&answer).is_some()
        }
    };
    assert!(
        decodes,
        "the {} answer does not decode: {:02x?}",
        method.name(),
        &answer[..answer.len().min(64)]
    );
});
