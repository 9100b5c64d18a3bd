"""How other frameworks use gagpo's environments: served over OpenEnv's protocol, with its
client (:mod:`gagpo.integrations.openenv`, ``gagpo serve env``), and as TRL's
``environment_factory`` tools (:mod:`gagpo.integrations.trl`)."""
