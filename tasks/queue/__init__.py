"""The queue as people read it (the API and the queue page): its rows (read) and each waiting
task's note in words (notes). Its order is the scheduler's (tasks.scheduler.queue_order)."""
