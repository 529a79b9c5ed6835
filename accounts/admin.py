from django.contrib import admin

from accounts.forms import ThrottledAdminAuthenticationForm
from accounts.models import ApiToken, AuditEvent, Invitation, Membership, Organization
from core.admin import BumpsGenerationAdmin

# The admin's sign-in page shares the throttle and the message of the site's (accounts.throttles).
admin.site.login_form = ThrottledAdminAuthenticationForm


@admin.register(Organization)
class OrganizationAdmin(BumpsGenerationAdmin):
    """Its name and slug show on every round's pages (filter choices, chart points): an edit invalidates them."""

    list_display = ["name", "slug", "created_at"]
    search_fields = ["name"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role", "organization"]
    search_fields = ["user__username", "organization__name"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["email", "organization", "role", "created_at", "expires_at", "accepted_at"]
    exclude = ["token_hash"]

    def has_add_permission(self, request, obj=None) -> bool:
        # An invitation needs its token mailed; only the members page (accounts.services) can do that.
        return False


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "scope", "expires_at", "revoked_at", "last_used_at"]
    exclude = ["secret_hash"]
    readonly_fields = ["prefix"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor_label", "action", "subject_type", "subject_id"]
    list_filter = ["action", "subject_type"]

    def has_change_permission(self, request, obj=None) -> bool:  # the audit trail is append-only
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
