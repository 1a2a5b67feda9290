# One-command set-up. `make run`: build, initialise ./data from the fixture zerostate, import archive_1 and run
# the node. `make test`: the whole test suite.

FIXTURES ?= ../shared/fixtures
DATA ?= data
REGOLITH = cargo run --quiet --release --bin regolith --

.PHONY: run test deps build bench

deps:
	@scripts/install-deps.sh

build: deps
	cargo build --release --bin regolith

run: build
	@if [ ! -f $(DATA)/global.json ]; then \
		$(REGOLITH) init --zerostate $(FIXTURES)/zerostate.boc --data $(DATA); \
	fi
	$(REGOLITH) import --data $(DATA) $(FIXTURES)/archive_1.bin
	$(REGOLITH) inspect --data $(DATA) summary
	$(REGOLITH) run --data $(DATA)

test: deps
	cargo test --workspace

bench: deps
	cargo bench --workspace --bench storage --bench ledger --bench proofs --bench import
	$(REGOLITH) bench queue --import-file $(FIXTURES)/queue_state/shard.bin
	$(REGOLITH) bench rpc --fixtures $(FIXTURES)
