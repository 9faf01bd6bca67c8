"""Prompted LLM classifiers over any OpenAI-compatible chat server.

Modules, one job each:
  endpoint    where to send requests and how that server speaks (structured output, system role)
  settings    the LLM options read from ModelOptions.extra, validated
  prompts     render the Jinja2 templates in prompts/ into chat messages; template-set hash
  answer      the answer JSON schema, tolerant parsing and validation against the taxonomy
  cache       SQLite response cache and request/response log (`classify logs`)
  response    a server's answer read defensively: types, ranges, size bound, secrets blanked
  client      async OpenAI client: bounded concurrency, retries honouring Retry-After, caching,
              self-consistency samples with `n` where the server honours it
  pool        several servers of one model as one: least-outstanding balancing, failover
  batch       the batch API (`--batch`): submit, poll, collect into the cache, resume
  server      start/stop the local llama.cpp server (`local:` specs)
  fewshot     pick k examples from the training records by embedding similarity
  classifier  the Classifier implementation registered for `openai:` and `local:`
  estimate    dry-run request/token/cost estimate
"""
