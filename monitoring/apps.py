from django.apps import AppConfig


class MonitoringConfig(AppConfig):
    name = "monitoring"
    verbose_name = "Monitoring"

    def ready(self):
        # The domain announces its calls (core.signals); the counting is here, so no domain
        # app imports monitoring.
        from core import signals
        from monitoring import metrics

        signals.sync_call_recorded.connect(metrics.record_sync_call, dispatch_uid="sync-metrics")
        signals.acknowledgement_recorded.connect(
            metrics.record_acknowledgement, dispatch_uid="acknowledgement-metrics"
        )
        signals.order_placement_recorded.connect(
            metrics.record_order_placement, dispatch_uid="order-placement-metrics"
        )
        signals.order_status_changed.connect(
            metrics.record_order_status_change, dispatch_uid="order-status-metrics"
        )
        signals.shipment_recorded.connect(metrics.record_shipment, dispatch_uid="shipment-metrics")
        signals.snapshot_recorded.connect(metrics.record_snapshot, dispatch_uid="snapshot-metrics")
