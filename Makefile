# One-command set-up. `make run`: build, then a live devnet of three `regolith run` processes on 127.0.0.1:
# node1 makes a new chain (one mc block a second, from a zerostate generated from the fixture's config) and
# serves it, node2 and node3 start from that zerostate and follow its tip through sync (data in
# ./devnet-live/nodeK, kept across runs). `make run-fixture`: the same with node1 importing the fixture chain
# (./devnet). `make test`: the whole test suite.

FIXTURES ?= ../shared/fixtures
NODES ?= 3
REGOLITH = cargo run --quiet --release --bin regolith --

.PHONY: run run-fixture test deps build bench

deps:
	@scripts/install-deps.sh

build: deps
	cargo build --release --bin regolith

run: build
	$(REGOLITH) devnet --nodes $(NODES) --dir devnet-live --live --zerostate $(FIXTURES)/zerostate.boc

run-fixture: build
	$(REGOLITH) devnet --nodes $(NODES) --dir devnet --zerostate $(FIXTURES)/zerostate.boc \
		--archive $(FIXTURES)/archive_1.bin

test: deps
	cargo test --workspace

bench: deps
	cargo bench --workspace --bench storage --bench ledger --bench proofs --bench import
	$(REGOLITH) bench queue --import-file $(FIXTURES)/queue_state/shard.bin
	$(REGOLITH) bench rpc --fixtures $(FIXTURES)
	$(REGOLITH) bench client
	$(REGOLITH) bench sync --fixtures $(FIXTURES)
	$(REGOLITH) bench handles
	$(REGOLITH) bench api --fixtures $(FIXTURES) --generate 4000 --accounts 10000
