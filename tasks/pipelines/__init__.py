"""Pipelines: steps that run one after another (or as a DAG), each a task.

- document.py: a pipeline document parsed and checked whole; dag.py: who runs after whom;
  macros.py: the ``${steps.NAME.OUTPUT}`` a step's spec names, outputs.py: resolved when it queues
- models.py: Pipeline and PipelineStep (the tasks app's models: tasks.models imports them)
- actions.py: submit and cancel; retry.py: a retry, a failed step resuming from its checkpoint
- waiting.py: the rules the tick applies to WAITING tasks (any with after / after_any) and to
  the pipelines whose last step ended
- api/ (serializers, views, urls: /api/v2/pipelines) and web/ (views, graph.py: the drawing of
  a pipeline's steps; routed in argus_site.web_urls)
"""
