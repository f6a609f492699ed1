"""Where traces come from: dump files, the run dataset, and folders being written.

``dumps/`` reads slime's ``.pt`` dumps safely, each in a limited worker process;
``dataset/`` keeps a whole run as Parquet by rollout id (``convert``) and opens it
lazily; ``follow`` notices new complete dumps in a folder; ``engine/`` receives
the engines' own request traces over OTLP, keeps them and joins them into frames;
``loading`` is the caller's API over all of them (``load_frames``, ``load_dump``, ``load_dumps``).
"""
